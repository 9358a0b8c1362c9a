// Reading the Slurm step from environment variables (see slurm_step.hpp for the contract).
//
// The variables are read through a small env_reader that parses integers strictly
// (std::from_chars over the whole value, range-checked) and words every error the same way:
// VARIABLE=value, then what was expected. Checks across variables live in read_slurm_step's
// helpers, one per concern (nodes, tasks, this task's ids, GPUs, job metadata).
// Not here: what muster does with the step (rank layout, the job plan).
#include "launcher/slurm_step.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <numeric>

#include "common/error.hpp"
#include "common/hostlist.hpp"

extern char** environ;

namespace muster::launcher {
namespace {

// A variable that was looked up: its name and its value (nullptr when unset).
struct variable {
  std::string_view name;
  const std::string* value = nullptr;

  explicit operator bool() const { return value != nullptr; }
  std::string shown() const { return fmt::format("{}={}", name, *value); }
};

// The whole of text as an integer in [min, max], or nullopt.
template <class Int>
std::optional<Int> to_integer(std::string_view text, Int min, Int max) {
  Int parsed{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || parsed < min ||
      parsed > max)
    return std::nullopt;
  return parsed;
}

template <class Int>
Int parse_integer(std::string_view name, std::string_view value, Int min, Int max) {
  std::optional<Int> parsed = to_integer(value, min, max);
  if (!parsed)
    MUSTER_THROW(errc::environment, "{}={} is not an integer from {} to {}", name, value, min, max);
  return *parsed;
}

class env_reader {
 public:
  explicit env_reader(const env_map& env) : env_(env) {}

  variable get(std::string_view name) const {
    auto it = env_.find(name);
    return {name, it == env_.end() ? nullptr : &it->second};
  }

  // The first of `names` that is set (or an unset variable named after the first).
  variable first(std::initializer_list<std::string_view> names) const {
    for (std::string_view name : names)
      if (variable v = get(name)) return v;
    return {*names.begin(), nullptr};
  }

  template <class Int>
  std::optional<Int> optional_int(variable v, Int min,
                                  Int max = std::numeric_limits<Int>::max()) const {
    if (!v) return std::nullopt;
    return parse_integer<Int>(v.name, *v.value, min, max);
  }

  template <class Int>
  Int required_int(variable v, Int min, Int max, std::string_view why) const {
    if (!v) MUSTER_THROW(errc::environment, "{} is not set; {}", v.name, why);
    return parse_integer<Int>(v.name, *v.value, min, max);
  }

 private:
  const env_map& env_;
};

constexpr int kIntMax = std::numeric_limits<int>::max();
constexpr int kMaxGpuIndex = 1023;  // far above any node's GPU count; bounds a range's size

// The comma-separated entries of value, empty ones included: "" gives none, "1," gives "1" and
// "". Each entry is a view into value, so its column is entry.data() - value.data() + 1.
std::vector<std::string_view> split_commas(std::string_view value) {
  std::vector<std::string_view> entries;
  if (value.empty()) return entries;
  for (std::size_t start = 0;;) {
    std::size_t comma = value.find(',', start);
    entries.push_back(value.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) return entries;
    start = comma + 1;
  }
}

// 1-based column of entry in value (entry is a view into value).
std::size_t column_of(std::string_view value, std::string_view entry) {
  return static_cast<std::size_t>(entry.data() - value.data()) + 1;
}

// What is wrong where entries[i] (of value) is empty: a leading, trailing or doubled ','.
std::string empty_entry_note(std::string_view value, const std::vector<std::string_view>& entries,
                             std::size_t i) {
  if (i == 0) return "leading ','";
  if (i + 1 == entries.size()) return "trailing ','";
  std::size_t column = column_of(value, entries[i]);
  return fmt::format("empty entry between the commas at columns {} and {}", column - 1, column);
}

std::string node_count_note(const variable& nodelist, std::size_t num_nodes) {
  return fmt::format("{} names {} node{}", nodelist.shown(), num_nodes, num_nodes == 1 ? "" : "s");
}

// Fills nodelist, nodes and num_nodes, and checks the node count variable against the list.
variable read_nodes(const env_reader& env, slurm_step& step) {
  variable list = step.in_step()
                      ? env.first({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})
                      : env.first({"SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  if (!list)
    MUSTER_THROW(errc::environment, "{} is not set; Slurm sets it in every job and step",
                 list.name);
  try {
    step.nodes = expand_hostlist(*list.value);
  } catch (const muster::error& e) {
    MUSTER_THROW(errc::environment, "{}: {}", list.name, e.what());
  }
  if (step.nodes.empty()) MUSTER_THROW(errc::environment, "{} names no nodes", list.shown());
  step.nodelist = *list.value;
  step.num_nodes = static_cast<int>(step.nodes.size());
  variable count = step.in_step() ? env.first({"SLURM_STEP_NUM_NODES", "SLURM_NNODES"})
                                  : env.first({"SLURM_NNODES", "SLURM_JOB_NUM_NODES"});
  if (auto n = env.optional_int<int>(count, 1); n && *n != step.num_nodes)
    MUSTER_THROW(errc::environment, "{} but {}", count.shown(),
                 node_count_note(list, step.nodes.size()));
  return list;
}

// Fills tasks_per_node, num_tasks and ntasks_per_node; checks them against the nodes.
variable read_tasks(const env_reader& env, const variable& list, slurm_step& step) {
  variable tpn = step.in_step() ? env.first({"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})
                                : env.get("SLURM_TASKS_PER_NODE");
  if (!tpn)
    MUSTER_THROW(errc::environment, "{} is not set; Slurm sets it in every job and step", tpn.name);
  step.tasks_per_node = expand_tasks_per_node(tpn.name, *tpn.value);
  if (step.tasks_per_node.size() != step.nodes.size())
    MUSTER_THROW(errc::environment, "{} gives {} counts but {}", tpn.shown(),
                 step.tasks_per_node.size(), node_count_note(list, step.nodes.size()));
  long long sum = std::accumulate(step.tasks_per_node.begin(), step.tasks_per_node.end(), 0LL);
  if (sum > kIntMax) MUSTER_THROW(errc::environment, "{} sums to {} tasks", tpn.shown(), sum);
  step.num_tasks = static_cast<int>(sum);
  variable ntasks = step.in_step()
                        ? env.first({"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"})
                        : env.first({"SLURM_NTASKS", "SLURM_NPROCS"});
  if (auto n = env.optional_int<int>(ntasks, 1); n && *n != step.num_tasks)
    MUSTER_THROW(errc::environment, "{} but {} sums to {}", ntasks.shown(), tpn.shown(), sum);
  step.ntasks_per_node = env.optional_int<int>(env.get("SLURM_NTASKS_PER_NODE"), 1);
  return tpn;
}

// Reads one task id; unset is 0 outside an srun step (task 0 of the job) and an error in one.
int read_task_id(const env_reader& env, std::string_view name, bool in_step) {
  variable v = env.get(name);
  if (!v && !in_step) return 0;
  return env.required_int<int>(v, 0, kIntMax, "srun sets it for every task of a step");
}

// Outside an srun step: this node's index in the job's nodes (see slurm_step::node_id).
// `batch`: the batch script (or salloc's shell), whose SLURM_NODEID indexes the job's nodes;
// an interactive or extern step's indexes its own one node, so it is not read.
std::optional<int> find_job_node(const env_reader& env, const variable& list, bool batch,
                                 const slurm_step& step) {
  variable id_var = batch ? env.get("SLURM_NODEID") : variable{"SLURM_NODEID", nullptr};
  std::optional<int> id = env.optional_int<int>(id_var, 0);
  if (id && *id >= step.num_nodes)
    MUSTER_THROW(errc::environment, "{} but {}", id_var.shown(),
                 node_count_note(list, step.nodes.size()));
  variable name = env.get("SLURMD_NODENAME");
  if (!name) return id;
  if (id) {
    const std::string& named = step.nodes[static_cast<std::size_t>(*id)];
    if (*name.value != named)
      MUSTER_THROW(errc::environment, "{} but {} is {} in {}", name.shown(), id_var.shown(), named,
                   list.shown());
    return id;
  }
  auto found = std::find(step.nodes.begin(), step.nodes.end(), *name.value);
  if (found == step.nodes.end()) return std::nullopt;  // on a node outside the allocation
  return static_cast<int>(found - step.nodes.begin());
}

// Fills proc_id, node_id, local_id and node_name; checks them against the layout.
void read_task_ids(const env_reader& env, const variable& list, const variable& tpn, bool batch,
                   slurm_step& step) {
  step.proc_id = read_task_id(env, "SLURM_PROCID", step.in_step());
  if (step.proc_id >= step.num_tasks)
    MUSTER_THROW(errc::environment, "SLURM_PROCID={} but {} gives {} task{}", step.proc_id,
                 tpn.shown(), step.num_tasks, step.num_tasks == 1 ? "" : "s");
  if (variable name = env.get("SLURMD_NODENAME")) step.node_name = *name.value;
  if (step.in_step()) {
    step.node_id = read_task_id(env, "SLURM_NODEID", true);
    if (*step.node_id >= step.num_nodes)
      MUSTER_THROW(errc::environment, "SLURM_NODEID={} but {}", *step.node_id,
                   node_count_note(list, step.nodes.size()));
    if (step.node_name && *step.node_name != *step.this_node())
      MUSTER_THROW(errc::environment, "SLURMD_NODENAME={} but SLURM_NODEID={} is {} in {}",
                   *step.node_name, *step.node_id, *step.this_node(), list.shown());
  } else {
    step.node_id = find_job_node(env, list, batch, step);
  }
  step.local_id = read_task_id(env, "SLURM_LOCALID", step.in_step());
  if (!step.node_id) return;
  int on_node = step.tasks_per_node[static_cast<std::size_t>(*step.node_id)];
  if (step.local_id >= on_node)
    MUSTER_THROW(errc::environment, "SLURM_LOCALID={} but {} gives node {} ({}) {} task{}",
                 step.local_id, tpn.shown(), *step.node_id, *step.this_node(), on_node,
                 on_node == 1 ? "" : "s");
}

void read_gpus(const env_reader& env, slurm_step& step) {
  if (variable v = env.get("SLURM_JOB_GPUS")) step.job_gpus = parse_gpu_indices(v.name, *v.value);
  if (variable v = env.get("SLURM_STEP_GPUS")) step.step_gpus = parse_gpu_indices(v.name, *v.value);
  if (variable v = env.get("CUDA_VISIBLE_DEVICES"))
    step.visible_devices = parse_visible_devices(*v.value);
  step.gpus_on_node = env.optional_int<int>(env.get("SLURM_GPUS_ON_NODE"), 0);
}

void read_job_metadata(const env_reader& env, slurm_step& step) {
  step.cpus_on_node = env.optional_int<int>(env.get("SLURM_CPUS_ON_NODE"), 1);
  if (variable dir = env.get("SLURM_SUBMIT_DIR")) step.submit_dir = *dir.value;
  if (variable cluster = env.get("SLURM_CLUSTER_NAME"); cluster && !cluster.value->empty())
    step.cluster_name = *cluster.value;
  step.restart_count = env.optional_int<int>(env.get("SLURM_RESTART_COUNT"), 0).value_or(0);
  variable array_job = env.get("SLURM_ARRAY_JOB_ID");
  variable array_task = env.get("SLURM_ARRAY_TASK_ID");
  if (bool(array_job) != bool(array_task)) {
    const variable& set = array_job ? array_job : array_task;
    const variable& unset = array_job ? array_task : array_job;
    MUSTER_THROW(errc::environment, "{} is set but {} is not; Slurm sets both in an array job",
                 set.shown(), unset.name);
  }
  step.array_job_id = env.optional_int<std::uint32_t>(array_job, 1);
  step.array_task_id = env.optional_int<std::uint32_t>(array_task, 0);
}

}  // namespace

std::vector<std::string> parse_visible_devices(std::string_view value) {
  std::vector<std::string> devices;
  if (value == "NoDevFiles") return devices;
  for (std::string_view entry : split_commas(value)) {
    bool index = !entry.empty() && std::all_of(entry.begin(), entry.end(),
                                               [](char c) { return c >= '0' && c <= '9'; });
    bool uuid = entry.starts_with("GPU-") || entry.starts_with("MIG-");
    if ((!index && !uuid) || std::find(devices.begin(), devices.end(), entry) != devices.end())
      break;
    devices.emplace_back(entry);
  }
  return devices;
}


bool inside_slurm(const env_map& env) {
  return env.contains("SLURM_JOB_ID");
}

slurm_step read_slurm_step(const env_map& map) {
  env_reader env(map);
  slurm_step step;
  step.job_id = env.required_int<std::uint32_t>(
      env.get("SLURM_JOB_ID"), 1, std::numeric_limits<std::uint32_t>::max(),
      "this is not a Slurm job; run muster under sbatch, salloc or srun");
  variable step_var = env.get("SLURM_STEP_ID");
  step.step_id = env.optional_int<std::uint32_t>(step_var, 0);
  bool batch = !step.step_id || *step.step_id == kBatchStepId;  // or salloc's shell
  if (step.step_id == kInteractiveStepId || step.step_id == kBatchStepId ||
      step.step_id == kExternStepId)
    step.step_id.reset();  // the whole allocation: read the job's layout
  else if (step.step_id > kMaxNormalStepId)
    MUSTER_THROW(errc::environment,
                 "{} is a special step id muster does not know; expected a normal step (0 to {}) "
                 "or the interactive ({}), batch ({}) or extern ({}) step",
                 step_var.shown(), kMaxNormalStepId, kInteractiveStepId, kBatchStepId,
                 kExternStepId);
  variable list = read_nodes(env, step);
  variable tpn = read_tasks(env, list, step);
  read_task_ids(env, list, tpn, batch, step);
  read_gpus(env, step);
  read_job_metadata(env, step);
  return step;
}

std::vector<int> expand_tasks_per_node(std::string_view variable, std::string_view value) {
  auto bad = [&](std::string_view why) {
    MUSTER_THROW(errc::environment, "{}={}: {}; expected counts like 2(x3),1", variable, value,
                 why);
  };
  if (value.empty()) bad("empty");
  std::vector<std::string_view> entries = split_commas(value);
  std::vector<int> counts;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    std::string_view entry = entries[i];
    if (entry.empty()) bad(empty_entry_note(value, entries, i));
    std::size_t column = column_of(value, entry);
    std::string_view count_text = entry.substr(0, entry.find('('));
    std::optional<int> count = to_integer<int>(count_text, 1, kIntMax);
    if (!count)
      bad(fmt::format("\"{}\" at column {} is not a task count from 1 to {}", count_text, column,
                      kIntMax));
    std::size_t repeat = 1;
    if (count_text.size() < entry.size()) {
      std::string_view tail = entry.substr(count_text.size());  // "(xREPEAT)"
      std::string_view digits = tail.size() >= 3 ? tail.substr(2, tail.size() - 3) : "";
      bool malformed =
          !tail.starts_with("(x") || !tail.ends_with(")") || digits.empty() ||
          !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (malformed)
        bad(fmt::format("malformed repetition \"{}\" at column {} of \"{}\"", tail,
                        column + count_text.size(), entry));
      std::optional<std::size_t> parsed = to_integer<std::size_t>(digits, 1, kMaxHostlistHosts);
      if (!parsed)
        bad(fmt::format("repetition \"{}\" at column {} of \"{}\" is not from (x1) to (x{})", tail,
                        column + count_text.size(), entry, kMaxHostlistHosts));
      repeat = *parsed;
    }
    if (counts.size() + repeat > kMaxHostlistHosts)
      bad(fmt::format("more than {} nodes by \"{}\" at column {}", kMaxHostlistHosts, entry,
                      column));
    counts.insert(counts.end(), repeat, *count);
  }
  return counts;
}

std::vector<int> parse_gpu_indices(std::string_view variable, std::string_view value) {
  auto bad = [&](std::string_view why) {
    MUSTER_THROW(errc::environment, "{}={}: {}; expected GPU indices like 0,1,3 or 0-3", variable,
                 value, why);
  };
  std::vector<std::string_view> entries = split_commas(value);
  std::vector<int> indices;
  for (std::size_t e = 0; e < entries.size(); ++e) {
    std::string_view entry = entries[e];
    if (entry.empty()) bad(empty_entry_note(value, entries, e));
    std::string_view lo_text = entry.substr(0, entry.find('-'));
    std::optional<int> lo = to_integer<int>(lo_text, 0, kMaxGpuIndex);
    std::optional<int> hi = lo;
    if (lo && lo_text.size() < entry.size())
      hi = to_integer<int>(entry.substr(lo_text.size() + 1), *lo, kMaxGpuIndex);
    if (!lo || !hi)
      bad(fmt::format("\"{}\" at column {} is not an index or a rising range", entry,
                      column_of(value, entry)));
    for (int i = *lo; i <= *hi; ++i) {
      if (std::find(indices.begin(), indices.end(), i) != indices.end())
        bad(fmt::format("GPU {} appears twice", i));
      indices.push_back(i);
    }
  }
  return indices;
}

env_map process_env() {
  env_map env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text = *entry;
    std::size_t eq = text.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
  }
  return env;
}

}  // namespace muster::launcher
