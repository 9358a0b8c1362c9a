// musterd's configuration, /etc/muster/musterd.toml: where it serves, the site's policy, and the
// node facts that cannot be probed (or that tests describe). Every key, its default and its doc:
// etc/musterd.toml (a test keeps the two equal). Loaded at start and again on SIGHUP, where a
// bad file keeps the old configuration and the log says why.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/config_schema.hpp"
#include "daemon/router.hpp"

namespace muster::daemon {

inline constexpr const char* kDefaultConfig = "/etc/muster/musterd.toml";

struct daemon_config {
  struct {
    std::string socket = "/run/muster/musterd.sock";
    std::string mode = "0660";
    std::string group = "muster";
    int request_timeout_ms = 5000;
    std::string state_dir = "/var/lib/muster";
    int keep_days = 90;
  } daemon;
  struct {
    bool nvls_off = false;
    int trace_buffer = 2000;
  } policy;
  struct {
    int gpus = -1;                        // -1: probe (NVML)
    int compute_major = 0;                // 0: probe
    std::vector<std::string> interfaces;  // empty: probe sysfs
    std::vector<std::string> ib_hcas;     // empty: probe sysfs
    std::string gpu_description;          // empty: NVML
  } node;
  struct {
    double min_free_fraction = 0.9;
    std::int64_t max_ecc_uncorrected = 0;
    int xid_window_s = 86400;
    std::int64_t min_shm_mib = 512;
    std::int64_t min_disk_free_mib = 1024;
    std::string kernel_log = "/dev/kmsg";
    std::string shm_dir = "/dev/shm";
  } health;
  struct {
    std::string squeue = "squeue";
    std::string conf;
    int timeout_ms = 3000;
  } slurm;
};

std::span<const config::field<daemon_config>> daemon_config_schema();

// Loads `file` (missing and `required` false: the defaults), lets `adjust` change it (the
// command line's overrides, which name themselves in the sources: "command line --mode"), checks
// every value. Throws errc::config naming the file, line and key and the fix. What is allowed but
// likely wrong goes to `warnings`, one line each with the place, the key and what the host has:
// a node.interfaces entry this host lacks (not an error: interfaces may be hot-plugged).
daemon_config load_daemon_config(
    const std::filesystem::path& file, bool required,
    const std::function<void(daemon_config&, config::sources&)>& adjust = {},
    std::vector<std::string>* warnings = nullptr);

// The node store's file: <daemon.state_dir>/musterd.db.
std::filesystem::path node_store_file(const daemon_config& c);

// The socket file's mode, from daemon.mode ("0660").
unsigned socket_mode(const daemon_config& c);

// What the router knows of the node: the config's facts, the rest probed.
node_context node_context_of(const daemon_config& c);

// The config as TOML with every key's doc (etc/musterd.toml is this for the defaults).
std::string to_toml(const daemon_config& c);

// The [daemon] keys whose values differ between `running` and `loaded` ("daemon.socket,
// daemon.mode"; "" when none): what a SIGHUP cannot apply.
std::string daemon_keys_changed(const daemon_config& running, const daemon_config& loaded);

}  // namespace muster::daemon
