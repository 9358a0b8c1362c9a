// The GPU environment policy: see gpu_policy.hpp; the rules are tabled in docs/policy-rules.md.
#include "common/gpu_policy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string_view>
#include <utility>

#include "common/error.hpp"

namespace muster {
namespace {

constexpr std::string_view kCudaAllocConf = "PYTORCH_CUDA_ALLOC_CONF";
constexpr std::string_view kAllocConf = "PYTORCH_ALLOC_CONF";

bool fsdp(const std::string& sharding) {
  return sharding == "optim_grads" || sharding == "optim_grads_params";
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> parts;
  for (std::size_t at = 0; at <= s.size();) {
    const auto end = std::min(s.find(sep, at), s.size());
    if (auto part = trim(s.substr(at, end - at)); !part.empty()) parts.push_back(std::move(part));
    at = end + 1;
  }
  return parts;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : std::string(sep)) + p;
  return out;
}

// An allocator setting "key:value,key:value" as its options, in order.
using alloc_options = std::vector<std::pair<std::string, std::string>>;

alloc_options parse_alloc_conf(std::string_view conf) {
  alloc_options out;
  for (const auto& item : split(conf, ',')) {
    const auto colon = item.find(':');
    out.emplace_back(trim(item.substr(0, colon)),
                     colon == std::string::npos ? "" : trim(item.substr(colon + 1)));
  }
  return out;
}

std::string format_alloc_conf(const alloc_options& options) {
  std::vector<std::string> items;
  for (const auto& [key, value] : options) items.push_back(key + ":" + value);
  return join(items, ",");
}

bool expandable(const alloc_options& options) {
  for (const auto& [key, value] : options)
    if (key == "expandable_segments") return lower(value) == "true";
  return false;
}

// (major, minor) of "2.5.1+cu124"; nullopt when unknown or unreadable.
std::optional<std::pair<int, int>> torch_release(const std::string& version) {
  const auto parts = split(version, '.');
  if (parts.size() < 2) return std::nullopt;
  try {
    return std::pair{std::stoi(parts[0]), std::stoi(parts[1])};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Whether an NCCL interface or HCA list ("eth", "=eth0,ib0", "^docker", "mlx5_0:1,mlx5_1")
// selects at least one of `names`, as NCCL reads it: prefixes, '=' for exact names, '^' to
// exclude, ":port" after an HCA.
bool nccl_list_selects(const std::string& list, const std::vector<std::string>& names) {
  std::string_view body = list;
  const bool exclude = body.starts_with('^');
  if (exclude) body.remove_prefix(1);
  const bool exact = body.starts_with('=');
  if (exact) body.remove_prefix(1);
  auto listed = [&](const std::string& name) {
    for (auto entry : split(body, ',')) {
      entry = entry.substr(0, entry.find(':'));
      if (exact ? name == entry : name.starts_with(entry)) return true;
    }
    return false;
  };
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& name) { return listed(name) != exclude; });
}

// The decisions being made, with the helpers every rule uses.
class policy_run {
 public:
  explicit policy_run(const gpu_policy_input& in) : in(in) {}

  const gpu_policy_input& in;
  gpu_policy_result out;

  std::optional<std::string> user(std::string_view variable) const {
    auto it = in.env.find(variable);
    return it == in.env.end() ? std::nullopt : std::optional(it->second);
  }
  // Sets `variable` (noting what the user had, when it differs); nothing when it already is.
  void set(const char* rule, std::string_view variable, const std::string& value,
           std::string reason) {
    const auto had = user(variable);
    if (had == value) return;
    if (had) reason += fmt::format("; was {}", had->empty() ? "set empty" : *had);
    out.env.push_back({rule, std::string(variable), value, std::move(reason)});
  }
  // Sets `variable` only where the user has not.
  void set_default(const char* rule, std::string_view variable, const std::string& value,
                   std::string reason) {
    if (!user(variable)) out.env.push_back({rule, std::string(variable), value, std::move(reason)});
  }
  void unset(const char* rule, std::string_view variable, std::string reason) {
    out.env.push_back({rule, std::string(variable), std::nullopt, std::move(reason)});
  }
  void refuse(const char* rule, std::string message) {
    out.errors.push_back({rule, fmt::format("{} (rule {})", message, rule)});
  }
  bool on_gpus() const { return in.node.gpus > 0; }
};

// --- the rules, in the order they run (docs/policy-rules.md lists them the same way) ---

// Where expandable segments come from: the user's variable that holds them ("NAME=value"),
// else that they were asked for.
std::string expandable_source(const policy_run& p) {
  for (auto name : {kCudaAllocConf, kAllocConf})
    if (const auto conf = p.user(name); conf && expandable(parse_alloc_conf(*conf)))
      return fmt::format("{}={}", name, *conf);
  return "expandable segments asked for (expandable_segments:True)";
}

// The allocator settings: both variable names, consistent, with expandable_segments:True when
// asked for. Returns whether expandable segments will be on.
bool allocator_settings(policy_run& p) {
  const auto cuda = p.user(kCudaAllocConf), generic = p.user(kAllocConf);
  // the same options in another order are the same settings
  const auto sorted = [](alloc_options o) {
    std::sort(o.begin(), o.end());
    return o;
  };
  if (cuda && generic && sorted(parse_alloc_conf(*cuda)) != sorted(parse_alloc_conf(*generic))) {
    p.refuse("alloc-conf-mismatch",
             fmt::format("{}={} and {}={} differ, and which one PyTorch reads depends on its "
                         "version (PYTORCH_ALLOC_CONF is the newer name); set both to the same "
                         "value, or unset one",
                         kCudaAllocConf, *cuda, kAllocConf, *generic));
    return expandable(parse_alloc_conf(*cuda)) || expandable(parse_alloc_conf(*generic));
  }
  const auto had = cuda ? cuda : generic;
  auto options = parse_alloc_conf(had.value_or(""));
  const char* rule = "alloc-conf-both";
  std::string reason = fmt::format("{} and {} the same, so every PyTorch version reads it",
                                   kCudaAllocConf, kAllocConf);
  if (p.in.expandable_segments && !expandable(options)) {
    std::erase_if(options, [](const auto& o) { return o.first == "expandable_segments"; });
    options.emplace_back("expandable_segments", "True");
    rule = "alloc-conf-expandable";
    reason =
        "expandable segments asked for: the allocator grows segments in place instead of "
        "fragmenting (set under both names)";
  }
  if (!options.empty()) {
    const auto conf = format_alloc_conf(options);
    for (auto name : {kCudaAllocConf, kAllocConf})
      if (parse_alloc_conf(p.user(name).value_or("")) != options) p.set(rule, name, conf, reason);
  }
  return expandable(options);
}

void nccl_user_buffers(policy_run& p, bool expandable_on) {
  if (!p.in.nccl_ub) return;
  const auto release = torch_release(p.in.torch_version);
  const bool fixed = release && *release >= std::pair{2, 11};
  if (expandable_on && !fixed)
    p.refuse("nccl-ub-expandable-segments",
             fmt::format("comm.nccl_ub = true and {} cannot be used together before PyTorch "
                         "2.11 (this job: {}): NCCL user buffers must stay where they were "
                         "registered, and expandable segments remap them; remove "
                         "expandable_segments:True, or set comm.nccl_ub = false (a plain srun's "
                         "--muster-policy: drop expandable_segments or nccl_ub from its list)",
                         expandable_source(p),
                         p.in.torch_version.empty() ? "version unknown" : p.in.torch_version));
  if (fsdp(p.in.sharding) && !p.in.fsdp_double_buffer)
    p.out.settings.push_back(
        {"nccl-ub-double-buffer", "fsdp_double_buffer", "true",
         "NCCL user buffers are registered once, so the FSDP all-gather and reduce-scatter need "
         "their persistent double buffer: turn on your program's (Megatron-FSDP: "
         "--fsdp-double-buffer with --use-nccl-ub; muster launch and run see that flag on the "
         "command line, a plain srun needs fsdp_double_buffer in its --muster-policy list) "
         "(it is off; muster-train keeps its own)"});
}

void cuda_device_max_connections(policy_run& p) {
  constexpr std::string_view var = "CUDA_DEVICE_MAX_CONNECTIONS";
  const bool model_parallel = p.in.tp > 1 || p.in.cp > 1;
  // Blackwell (compute capability 10) and later order the queues themselves; unknown counts
  // as earlier, the safe side.
  const bool before_blackwell = p.in.node.compute_major < 10;
  const bool ep_overlap = p.in.ep > 1 && p.in.ep_comm_overlap;
  const auto had = p.user(var);
  if (model_parallel && !fsdp(p.in.sharding) && before_blackwell) {
    if (ep_overlap) {
      p.refuse("cuda-max-connections-conflict",
               fmt::format("tensor = {}, context = {} needs CUDA_DEVICE_MAX_CONNECTIONS=1 before "
                           "Blackwell GPUs, and the overlapped expert all-to-all (expert = {}) "
                           "needs more than one hardware queue; turn the expert all-to-all "
                           "overlap off, or use FSDP sharding (parallel.sharding = "
                           "optim_grads_params)",
                           p.in.tp, p.in.cp, p.in.ep));
      return;
    }
    p.set("cuda-max-connections-tp-cp", var, "1",
          fmt::format("tensor = {}, context = {} without FSDP sharding, before Blackwell: one "
                      "hardware queue keeps TP/CP communication ahead of the compute that waits "
                      "for it (Megatron-LM requires it)",
                      p.in.tp, p.in.cp));
  } else if (had == "1" && fsdp(p.in.sharding)) {
    p.unset("cuda-max-connections-fsdp", var,
            fmt::format("parallel.sharding = {}: CUDA_DEVICE_MAX_CONNECTIONS=1 would serialise "
                        "the FSDP all-gathers behind compute; unset (was 1)",
                        p.in.sharding));
  } else if (had == "1" && ep_overlap) {
    p.unset("cuda-max-connections-ep-overlap", var,
            "the expert all-to-all overlap needs more than one hardware queue; unset (was 1)");
  }
}

void graphs_with_expandable_segments(policy_run& p, bool expandable_on) {
  if (!p.in.cuda_graphs || !expandable_on) return;
  p.set("expandable-segments-cuda-graphs", "NCCL_GRAPH_REGISTER", "0",
        "CUDA graphs with expandable segments: NCCL must not register the graph's buffers, "
        "which the allocator may remap");
}

void flight_recorder(policy_run& p) {
  if (!p.on_gpus()) return;
  const char* rule = "nccl-flight-recorder";
  p.set_default(rule, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "3",
                "a failed or timed-out collective ends the process (after the dump) instead of "
                "hanging it");
  p.set_default(rule, "TORCH_NCCL_DUMP_ON_TIMEOUT", "1",
                "a timed-out collective leaves a flight-recorder dump (each rank's last "
                "collectives) to read afterwards");
  p.set_default(rule, "TORCH_NCCL_TRACE_BUFFER_SIZE", std::to_string(p.in.site.trace_buffer),
                "the last collectives of each rank kept for the dump");
  if (!p.in.dump_dir.empty())
    p.set_default(rule, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", p.in.dump_dir + "/nccl_trace_rank_",
                  "the dumps land in the run directory, one file per rank");
}

// NCCL_SOCKET_IFNAME (`sockets`) or NCCL_IB_HCA from the node's `names`: set where unset (or
// set empty); a user's list that selects none of them is replaced, as NCCL would `fail` with
// it. For the sockets the value is the ib* (IPoIB) interfaces where there are any, as NCCL's
// own choice prefers them, and a user's list naming loopback (lo: one node's ranks alone) stays.
void nccl_devices(policy_run& p, const char* rule, std::string_view var,
                  const std::vector<std::string>& names, std::string_view what,
                  std::string_view fail, bool sockets) {
  if (!p.on_gpus() || names.empty()) return;
  std::vector<std::string> chosen = names;
  if (sockets &&
      std::any_of(names.begin(), names.end(), [](const auto& n) { return n.starts_with("ib"); }))
    std::erase_if(chosen, [](const auto& n) { return !n.starts_with("ib"); });
  const auto node_list = "=" + join(chosen, ",");
  const auto had = p.user(var);
  if (!had || had->empty()) {
    p.set(rule, var, node_list, fmt::format("the node's {}", what));
    return;
  }
  auto selectable = names;  // a user's list is judged against every one
  if (sockets && !had->starts_with('^')) selectable.emplace_back("lo");  // naming it
  if (!nccl_list_selects(*had, selectable))
    p.set(rule, var, node_list,
          fmt::format("{}={} selects none of the node's {} ({}): {}", var, *had, what,
                      join(names, ", "), fail));
}

void nvls(policy_run& p) {
  if (!p.on_gpus()) return;
  constexpr std::string_view var = "NCCL_NVLS_ENABLE";
  if (p.in.site.nvls_off)
    p.set("nccl-nvls-off", var, "0", "the site turns NVLink SHARP off (musterd.toml)");
  else if (p.in.memory_tight)
    p.set_default("nccl-nvls-off", var, "0",
                  "GPU memory is tight for this job, and NVLink SHARP buffers take some per GPU");
}

void device_order(policy_run& p) {
  if (!p.on_gpus()) return;
  p.set("cuda-device-order", "CUDA_DEVICE_ORDER", "PCI_BUS_ID",
        "CUDA numbers GPUs as nvidia-smi, Slurm and NVML do, so GPU N means one device everywhere");
}

}  // namespace

gpu_policy_result decide_gpu_policy(const gpu_policy_input& in) {
  policy_run p(in);
  const bool expandable_on = allocator_settings(p);
  nccl_user_buffers(p, expandable_on);
  cuda_device_max_connections(p);
  graphs_with_expandable_segments(p, expandable_on);
  flight_recorder(p);
  nccl_devices(p, "nccl-socket-ifname", "NCCL_SOCKET_IFNAME", in.node.interfaces,
               "network interfaces", "NCCL finds no interface and fails to start", true);
  nccl_devices(p, "nccl-ib-hca", "NCCL_IB_HCA", in.node.ib_hcas, "InfiniBand HCAs",
               "NCCL finds no InfiniBand device and falls back to TCP sockets", false);
  nvls(p);
  device_order(p);
  return std::move(p.out);
}

bool gpu_policy_reads(std::string_view variable) {
  static constexpr std::string_view kRead[] = {kCudaAllocConf,
                                               kAllocConf,
                                               "CUDA_DEVICE_MAX_CONNECTIONS",
                                               "NCCL_GRAPH_REGISTER",
                                               "TORCH_NCCL_ASYNC_ERROR_HANDLING",
                                               "TORCH_NCCL_DUMP_ON_TIMEOUT",
                                               "TORCH_NCCL_TRACE_BUFFER_SIZE",
                                               "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
                                               "NCCL_SOCKET_IFNAME",
                                               "NCCL_IB_HCA",
                                               "NCCL_NVLS_ENABLE",
                                               "CUDA_DEVICE_ORDER"};
  return std::find(std::begin(kRead), std::end(kRead), variable) != std::end(kRead);
}

const std::vector<std::string>& gpu_policy_rules() {
  static const std::vector<std::string> rules = {"alloc-conf-mismatch",
                                                 "alloc-conf-expandable",
                                                 "alloc-conf-both",
                                                 "nccl-ub-expandable-segments",
                                                 "nccl-ub-double-buffer",
                                                 "cuda-max-connections-conflict",
                                                 "cuda-max-connections-tp-cp",
                                                 "cuda-max-connections-fsdp",
                                                 "cuda-max-connections-ep-overlap",
                                                 "expandable-segments-cuda-graphs",
                                                 "nccl-flight-recorder",
                                                 "nccl-socket-ifname",
                                                 "nccl-ib-hca",
                                                 "nccl-nvls-off",
                                                 "cuda-device-order"};
  return rules;
}

std::vector<gpu_policy_decision> require_gpu_policy(const gpu_policy_result& result) {
  if (!result.errors.empty()) {
    std::vector<std::string> messages;
    for (const auto& e : result.errors) messages.push_back(e.message);
    MUSTER_THROW(errc::config, "{}", join(messages, "; "));
  }
  return result.env;
}

void apply_gpu_policy(const std::vector<gpu_policy_decision>& decisions, env_vars& env) {
  for (const auto& d : decisions) {
    if (d.value)
      env[d.variable] = *d.value;
    else
      env.erase(d.variable);
  }
}

std::string describe(const gpu_policy_decision& d) {
  return fmt::format("{}: {} {}: {}", d.rule, d.value ? "set" : "unset",
                     d.value ? d.variable + "=" + *d.value : d.variable, d.reason);
}

}  // namespace muster
