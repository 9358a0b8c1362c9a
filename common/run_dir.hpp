// The layout of a run directory, and run ids.
//
//   <runs_dir>/<run_id>/
//     node-<hostname>.db     one run-store file per node, written only by that node's launcher
//     job.toml               the resolved job config
//     logs/rank-<N>.log      what rank N wrote to stdout and stderr
//     logs/rank-<N>.error.json, logs/rank-<N>.heartbeat   its error file and heartbeat file
//     logs/rank-<N>.steps    its per-step records, which the launcher copies to the run store
//
// run_paths computes these paths and creates the tree; it does not open or write any file in
// it (node_writer and run_reader do, see run_store.hpp and run_reader.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace muster::store {

// A new run id: "<name>-<YYYYMMDD>-<HHMMSS>-<4 hex>", the time in UTC, e.g.
// "moe-small-20261122-143005-9f3a". Ids of one job sort by start time. The name is sanitised:
// characters other than [A-Za-z0-9._-] become '_', leading '.' and '-' are dropped, it is cut
// to 48 characters, and an empty result becomes "run". The suffix tells apart runs started
// in the same second; this overload draws it from std::random_device.
std::string make_run_id(std::string_view job_name, std::chrono::system_clock::time_point when);
// The same with a chosen suffix (its low 16 bits), for tests and reproducible ids.
std::string make_run_id(std::string_view job_name, std::chrono::system_clock::time_point when,
                        std::uint32_t suffix);

// Throws errc::invalid_input unless `value` is safe as one file-name component: 1 to 128
// characters from [A-Za-z0-9._-], not starting with '.' or '-' (so no "..", no '/', no hidden
// files). `what` names the value in the message ("hostname", "run id"); the message shows
// control characters, NUL and non-ASCII bytes as \xHH and cuts a long value short.
void check_file_component(std::string_view what, std::string_view value);

class run_paths {
 public:
  // The run `run_id` under `runs_dir`. Throws errc::invalid_input for an unsafe run id.
  run_paths(const std::filesystem::path& runs_dir, std::string_view run_id);
  // An existing run directory given by its path; its last component is the run id.
  explicit run_paths(const std::filesystem::path& run_dir);

  const std::filesystem::path& dir() const { return dir_; }
  const std::string& run_id() const { return run_id_; }
  // <dir>/node-<hostname>.db. Throws errc::invalid_input for an unsafe hostname.
  std::filesystem::path node_db(std::string_view hostname) const;
  // <dir>/logs/launcher-<hostname>.lock: held by that node's launchers (common/launcher_lock.hpp).
  // Throws errc::invalid_input for an unsafe hostname.
  std::filesystem::path launcher_lock(std::string_view hostname) const;
  // <dir>/job.toml
  std::filesystem::path job_config() const;
  // <dir>/logs
  std::filesystem::path logs_dir() const;
  // <dir>/logs/rank-<rank>.log. Throws errc::invalid_input for a negative rank.
  std::filesystem::path rank_log(std::int64_t rank) const;
  // <dir>/logs/rank-<rank>.error.json: the rank's TORCHELASTIC_ERROR_FILE. Same check.
  std::filesystem::path rank_error_file(std::int64_t rank) const;
  // <dir>/logs/rank-<rank>.heartbeat: the rank's MUSTER_HEARTBEAT_FILE. Same check.
  std::filesystem::path rank_heartbeat_file(std::int64_t rank) const;
  // <dir>/logs/rank-<rank>.steps: the rank's MUSTER_STEPS_FILE (common/step_line.hpp). Same.
  std::filesystem::path rank_steps_file(std::int64_t rank) const;

  // Creates <dir> and <dir>/logs (and missing parents); existing ones are fine. Throws errc::io
  // naming the directory, the system's reason, where creating stopped (a file in the way, a
  // directory this user may not write, a read-only or full file system) and the fix.
  void create() const;
  // The node files present, sorted by file name (so by hostname). Throws errc::io when the
  // directory cannot be listed, saying what to check.
  std::vector<std::filesystem::path> node_dbs() const;

 private:
  std::filesystem::path dir_;
  std::string run_id_;
};

// The hostname in a node file's name ("node-gpu-a07.db" -> "gpu-a07"); empty when the name is
// not of that form or the hostname would not pass check_file_component.
std::string node_db_host(const std::filesystem::path& file);

}  // namespace muster::store
