// musterd's configuration: see daemon_config.hpp.
#include "daemon/daemon_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <grp.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

#include "common/config_load.hpp"
#include "common/error.hpp"
#include "common/executable_path.hpp"
#include "common/node_network.hpp"
#include "daemon/gpu_inventory.hpp"

namespace muster::daemon {
namespace {

#define FIELD(member, key, doc) MUSTER_CONFIG_FIELD(daemon_config, member, key, doc)
const config::field<daemon_config> kConfigFields[] = {
    FIELD(daemon.socket, "daemon.socket", "the unix socket musterd serves"),
    FIELD(daemon.mode, "daemon.mode", "the socket file's mode, octal"),
    FIELD(daemon.group, "daemon.group",
          "the socket file's group: its members may ask for job-step environments"),
    FIELD(daemon.request_timeout_ms, "daemon.request_timeout_ms",
          "how long a client may take to send a full request line, in milliseconds"),
    FIELD(daemon.state_dir, "daemon.state_dir", "where the node store (musterd.db) lives"),
    FIELD(daemon.keep_days, "daemon.keep_days",
          "days the node store keeps job steps, decisions and health records"),
    FIELD(policy.nvls_off, "policy.nvls_off",
          "turn NVLink SHARP off for every job step (NCCL_NVLS_ENABLE=0)"),
    FIELD(policy.trace_buffer, "policy.trace_buffer",
          "collectives each rank keeps for the NCCL flight-recorder dump"),
    FIELD(node.gpus, "node.gpus", "GPUs on this node; -1 probes them (NVML)"),
    FIELD(node.compute_major, "node.compute_major",
          "the GPUs' compute capability major (9 Hopper, 10 Blackwell); 0 probes it"),
    FIELD(node.interfaces, "node.interfaces",
          "network interfaces NCCL may use; empty probes those up in /sys/class/net"),
    FIELD(node.ib_hcas, "node.ib_hcas",
          "InfiniBand/RoCE HCAs NCCL may use; empty probes those active in /sys/class/infiniband"),
    FIELD(node.gpu_description, "node.gpu_description",
          "a JSON file describing the GPUs instead of NVML (nodes without it, tests); empty: "
          "NVML"),
    FIELD(health.min_free_fraction, "health.min_free_fraction",
          "preflight: the share of each GPU's memory that must be free"),
    FIELD(health.max_ecc_uncorrected, "health.max_ecc_uncorrected",
          "preflight: the most uncorrected (volatile) ECC errors a GPU may have"),
    FIELD(health.xid_window_s, "health.xid_window_s",
          "preflight: how far back a hardware Xid in the kernel log fails it, in seconds"),
    FIELD(health.min_shm_mib, "health.min_shm_mib", "preflight: the least /dev/shm size, MiB"),
    FIELD(health.min_disk_free_mib, "health.min_disk_free_mib",
          "preflight: the least free space at the run directory, MiB"),
    FIELD(health.kernel_log, "health.kernel_log", "where Xid errors are read (kmsg records)"),
    FIELD(health.shm_dir, "health.shm_dir", "the shared-memory mount NCCL uses"),
    FIELD(slurm.squeue, "slurm.squeue",
          "Slurm's squeue, asked who owns a job; empty: no Slurm (a job is its first recorder's)"),
    FIELD(slurm.conf, "slurm.conf", "SLURM_CONF for squeue; empty: Slurm's default"),
    FIELD(slurm.timeout_ms, "slurm.timeout_ms",
          "how long squeue may take to answer, in milliseconds"),
};
#undef FIELD

// For the messages of a missing or unreadable file: musterd's, not a job file.
constexpr config::file_kind kFileKind = {
    "musterd's config file", "musterd's TOML configuration",
    "usually /etc/muster/musterd.toml (the package installs it with every key at its default)"};

// A node.gpu_description that cannot be read or parsed: the start would fail on it (and
// preflight later), so the load fails here, at the key's line.
void check_gpu_description(const daemon_config& c, const config::sources& where) {
  if (c.node.gpu_description.empty()) return;
  try {
    (void)read_gpu_description(c.node.gpu_description);
  } catch (const error& e) {
    const std::string_view why = e.what();
    MUSTER_THROW(errc::config, "{}: {}{}", config::place_of(where, "node.gpu_description"),
                 why.starts_with("node.gpu_description") ? "" : "node.gpu_description: ", why);
  }
}

// The highest node.compute_major taken. The majors so far run to 12 (Blackwell's GeForce and
// workstation parts, sm_120; Thor is 11); NVIDIA has added about one a generation, every two
// years, so 15 leaves room for the next few while refusing an architecture number written for
// its major (90 for Hopper's 9, 100 for 10), which would stop the rules that test it.
constexpr int kMaxComputeMajor = 15;

// Whether daemon.mode reads as an octal file mode, "0660".
bool octal_mode(const std::string& mode) {
  return !mode.empty() && mode.size() <= 4 &&
         mode.find_first_not_of("01234567") == std::string::npos;
}

void validate(const daemon_config& c, const config::sources& where) {
  using config::place_of;
  MUSTER_CHECK(octal_mode(c.daemon.mode), errc::config,
               "{}: daemon.mode: \"{}\" is not an octal file mode; use \"0660\" (quoted)",
               place_of(where, "daemon.mode"), c.daemon.mode);
  MUSTER_CHECK(!c.daemon.socket.empty(), errc::config,
               "{}: daemon.socket: empty; give a path "
               "such as \"/run/muster/musterd.sock\"",
               place_of(where, "daemon.socket"));
  MUSTER_CHECK(std::filesystem::path(c.daemon.socket).is_absolute(), errc::config,
               "{}: daemon.socket: \"{}\" is relative (to whichever directory musterd starts in; "
               "systemd's is /); give an absolute path such as \"/run/muster/musterd.sock\"",
               place_of(where, "daemon.socket"), c.daemon.socket);
  MUSTER_CHECK(c.daemon.socket.size() < sizeof(::sockaddr_un::sun_path), errc::config,
               "{}: daemon.socket: \"{}\" is {} bytes; a unix socket's path holds at most {}: "
               "choose a shorter one",
               place_of(where, "daemon.socket"), c.daemon.socket, c.daemon.socket.size(),
               sizeof(::sockaddr_un::sun_path) - 1);
  MUSTER_CHECK(std::stoul(c.daemon.mode, nullptr, 8) <= 0777, errc::config,
               "{}: daemon.mode: \"{}\" sets setuid, setgid or sticky bits, which a socket has "
               "no use for; use permission bits alone, such as \"0660\"",
               place_of(where, "daemon.mode"), c.daemon.mode);
  MUSTER_CHECK(c.daemon.request_timeout_ms >= 1 && c.daemon.request_timeout_ms <= 3'600'000,
               errc::config, "{}: daemon.request_timeout_ms: {} is not between 1 and 3600000",
               place_of(where, "daemon.request_timeout_ms"), c.daemon.request_timeout_ms);
  MUSTER_CHECK(c.daemon.keep_days >= 1, errc::config,
               "{}: daemon.keep_days: {}; keep at least 1 day (90 is the default)",
               place_of(where, "daemon.keep_days"), c.daemon.keep_days);
  MUSTER_CHECK(!c.daemon.state_dir.empty(), errc::config,
               "{}: daemon.state_dir: empty; give a directory such as \"/var/lib/muster\"",
               place_of(where, "daemon.state_dir"));
  MUSTER_CHECK(c.slurm.timeout_ms >= 1 && c.slurm.timeout_ms <= 60'000, errc::config,
               "{}: slurm.timeout_ms: {} is not between 1 and 60000",
               place_of(where, "slurm.timeout_ms"), c.slurm.timeout_ms);
  MUSTER_CHECK(c.health.min_free_fraction >= 0 && c.health.min_free_fraction <= 1, errc::config,
               "{}: health.min_free_fraction: {} is not between 0 and 1 (0.9 is the default)",
               place_of(where, "health.min_free_fraction"), c.health.min_free_fraction);
  MUSTER_CHECK(c.health.max_ecc_uncorrected >= 0 && c.health.xid_window_s >= 0 &&
                   c.health.min_shm_mib >= 0 && c.health.min_disk_free_mib >= 0,
               errc::config,
               "{}: the [health] limits are counts, seconds and MiB: none may be negative",
               place_of(where, "health.xid_window_s"));
  MUSTER_CHECK(c.policy.trace_buffer >= 0, errc::config,
               "{}: policy.trace_buffer: {} is negative; 2000 is the usual value",
               place_of(where, "policy.trace_buffer"), c.policy.trace_buffer);
  MUSTER_CHECK(c.node.gpus >= -1, errc::config, "{}: node.gpus: {}; use -1 to probe, or 0 and up",
               place_of(where, "node.gpus"), c.node.gpus);
  MUSTER_CHECK(c.node.compute_major >= 0 && c.node.compute_major <= kMaxComputeMajor, errc::config,
               "{}: node.compute_major: {} is no compute capability major; use 0 to probe, or 1 "
               "to {} (9 Hopper, 10 and 12 Blackwell: sm_90 is 9)",
               place_of(where, "node.compute_major"), c.node.compute_major, kMaxComputeMajor);
  check_gpu_description(c, where);
}

}  // namespace

std::span<const config::field<daemon_config>> daemon_config_schema() {
  return kConfigFields;
}

std::filesystem::path node_store_file(const daemon_config& c) {
  return std::filesystem::path(c.daemon.state_dir) / "musterd.db";
}

unsigned socket_mode(const daemon_config& c) {
  MUSTER_CHECK(octal_mode(c.daemon.mode), errc::config,
               "daemon.mode: \"{}\" is not an octal file mode; use \"0660\"", c.daemon.mode);
  return static_cast<unsigned>(std::stoul(c.daemon.mode, nullptr, 8));
}

namespace {

// The network interfaces in /sys/class/net, sorted; nullopt when it cannot be read (no sysfs:
// nothing to compare with).
std::optional<std::vector<std::string>> host_interfaces() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/sys/class/net", ec);
  if (ec) return std::nullopt;
  std::vector<std::string> names;
  for (const auto& entry : it) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A node.interfaces entry this host lacks: NCCL would be told to use it and fail.
void warn_interfaces(const daemon_config& c, const config::sources& where,
                     std::vector<std::string>& warnings) {
  if (c.node.interfaces.empty()) return;
  const auto host = host_interfaces();
  if (!host) return;
  std::vector<std::string> lacking;
  for (const auto& name : c.node.interfaces)
    if (!std::binary_search(host->begin(), host->end(), name)) lacking.push_back(name);
  if (lacking.empty()) return;
  warnings.push_back(fmt::format(
      "{}: node.interfaces: this host has no {} (it has {}); NCCL is told to use the list "
      "(NCCL_SOCKET_IFNAME) and fails until it is there: correct it, or leave it empty to probe",
      config::place_of(where, "node.interfaces"), fmt::join(lacking, " or "),
      host->empty() ? std::string("none") : fmt::format("{}", fmt::join(*host, ", "))));
}

// A node.ib_hcas entry this host lacks: NCCL_IB_HCA then selects none of the node's HCAs, and
// NCCL leaves InfiniBand for TCP sockets.
void warn_ib_hcas(const daemon_config& c, const config::sources& where,
                  std::vector<std::string>& warnings) {
  if (c.node.ib_hcas.empty()) return;
  std::error_code ec;
  std::vector<std::string> host;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/class/infiniband", ec))
    host.push_back(entry.path().filename().string());
  std::sort(host.begin(), host.end());
  std::vector<std::string> lacking;
  for (const auto& name : c.node.ib_hcas)
    if (!std::binary_search(host.begin(), host.end(), name.substr(0, name.find(':'))))
      lacking.push_back(name);
  if (lacking.empty()) return;
  warnings.push_back(fmt::format(
      "{}: node.ib_hcas: this host has no {} (it has {}); NCCL is told to use the list "
      "(NCCL_IB_HCA), finds no InfiniBand device and falls back to TCP sockets: correct it, or "
      "leave it empty to probe",
      config::place_of(where, "node.ib_hcas"), fmt::join(lacking, " or "),
      host.empty() ? std::string("none") : fmt::format("{}", fmt::join(host, ", "))));
}

// An executable named by a path (with a '/'), or found on PATH as posix_spawnp finds it
// (run_program): glibc searches /bin:/usr/bin when PATH is unset.
bool runnable(const std::string& program) {
  const char* path = std::getenv("PATH");
  return executable_path(program, path ? path : "", "/bin:/usr/bin").has_value();
}

// What the configuration names that this host lacks, beside the interfaces: each start, SIGHUP
// and --check-config says it, as the checks it turns off would otherwise be silent.
void warn_host(const daemon_config& c, const config::sources& where,
               std::vector<std::string>& warnings) {
  using config::place_of;
  if (!c.daemon.group.empty() && !::getgrnam(c.daemon.group.c_str()))
    warnings.push_back(fmt::format(
        "{}: daemon.group: group {} does not exist: the socket keeps the daemon's group (create "
        "it with groupadd --system {})",
        place_of(where, "daemon.group"), c.daemon.group, c.daemon.group));
  if (!c.slurm.squeue.empty() && !runnable(c.slurm.squeue))
    warnings.push_back(fmt::format(
        "{}: slurm.squeue: cannot run {} ({}): a job's owner cannot be asked of Slurm, so only "
        "root may record a Slurm job id; correct it, or set it to \"\" on a node without Slurm",
        place_of(where, "slurm.squeue"), c.slurm.squeue,
        c.slurm.squeue.find('/') != std::string::npos ? "no such executable" : "not on PATH"));
  std::error_code ec;
  if (!c.health.kernel_log.empty() && ::access(c.health.kernel_log.c_str(), R_OK) != 0)
    warnings.push_back(fmt::format(
        "{}: health.kernel_log: cannot read {} ({}): preflight skips its Xid check",
        place_of(where, "health.kernel_log"), c.health.kernel_log, std::strerror(errno)));
  else if (std::filesystem::is_directory(c.health.kernel_log, ec))
    warnings.push_back(fmt::format(
        "{}: health.kernel_log: {} is a directory, not the kernel's log (/dev/kmsg): preflight "
        "finds no Xid there",
        place_of(where, "health.kernel_log"), c.health.kernel_log));
  if (!c.slurm.conf.empty() && !std::filesystem::is_regular_file(c.slurm.conf, ec))
    warnings.push_back(fmt::format(
        "{}: slurm.conf: {} is no file: squeue cannot be asked who owns a job, so only root may "
        "record a Slurm job id",
        place_of(where, "slurm.conf"), c.slurm.conf));
  if (!std::filesystem::is_directory(c.health.shm_dir, ec))
    warnings.push_back(fmt::format(
        "{}: health.shm_dir: {} is no directory: preflight's shm_size check fails every job",
        place_of(where, "health.shm_dir"), c.health.shm_dir));
}

}  // namespace

daemon_config load_daemon_config(
    const std::filesystem::path& file, bool required,
    const std::function<void(daemon_config&, config::sources&)>& adjust,
    std::vector<std::string>* warnings) {
  daemon_config c;
  config::sources where;
  auto fields = config::bind_fields(c, daemon_config_schema());
  std::error_code ec;
  if (required || std::filesystem::exists(file, ec))
    config::load_file(file, fields, where, kFileKind);
  if (adjust) adjust(c, where);
  validate(c, where);
  if (warnings) {
    warn_interfaces(c, where, *warnings);
    warn_ib_hcas(c, where, *warnings);
    warn_host(c, where, *warnings);
  }
  return c;
}

node_context node_context_of(const daemon_config& c) {
  node_context n;
  n.preflight = {c.node.gpu_description, c.health.kernel_log, c.health.shm_dir};
  n.limits = {c.health.min_free_fraction, c.health.max_ecc_uncorrected, c.health.xid_window_s,
              c.health.min_shm_mib, c.health.min_disk_free_mib};
  n.node.gpus = c.node.gpus;
  n.node.compute_major = c.node.compute_major;
  if (n.node.gpus < 0 || n.node.compute_major == 0) {
    const auto probed = probe_gpus(c.node.gpu_description);
    if (n.node.gpus < 0) n.node.gpus = static_cast<int>(probed.devices.size());
    if (n.node.compute_major == 0 && !probed.devices.empty())
      n.node.compute_major = probed.devices.front().compute_major;
  }
  n.node.interfaces = c.node.interfaces;
  n.node.ib_hcas = c.node.ib_hcas;
  if (n.node.interfaces.empty() || n.node.ib_hcas.empty()) {
    auto probed = probe_node_network();
    if (n.node.interfaces.empty()) n.node.interfaces = std::move(probed.interfaces);
    if (n.node.ib_hcas.empty()) n.node.ib_hcas = std::move(probed.ib_hcas);
  }
  n.site.nvls_off = c.policy.nvls_off;
  n.site.trace_buffer = c.policy.trace_buffer;
  n.slurm.squeue = c.slurm.squeue;
  n.slurm.conf = c.slurm.conf;
  n.slurm.timeout = std::chrono::milliseconds(c.slurm.timeout_ms);
  return n;
}

std::string daemon_keys_changed(const daemon_config& running, const daemon_config& loaded) {
  daemon_config a = running, b = loaded;  // bind_fields needs mutable objects
  const auto before = config::bind_fields(a, daemon_config_schema());
  const auto after = config::bind_fields(b, daemon_config_schema());
  std::vector<std::string> changed;
  for (std::size_t i = 0; i < before.size(); ++i)
    if (before[i].key.starts_with("daemon.") &&
        config::format_value(before[i].value) != config::format_value(after[i].value))
      changed.emplace_back(before[i].key);
  return fmt::format("{}", fmt::join(changed, ", "));
}

std::string to_toml(const daemon_config& c) {
  daemon_config copy = c;
  return config::to_toml(config::bind_fields(copy, daemon_config_schema()), true);
}

}  // namespace muster::daemon
