// musterd's node store, <state_dir>/musterd.db: what happened on this node. The job steps it
// served (who owns each job, when each step started and ended, how), the policy decisions it
// sent them, the preflight results and the health observations. SQLite in WAL mode, versioned
// with migrations (common/sqlite_schema.hpp); readable with the sqlite3 shell.
//
// Not thread-safe: musterd's store thread owns it (server.hpp), so every request that reads or
// writes it runs there, one at a time. Every call throws errc::store naming the file and the fix
// (a full disk, a read-only directory) and leaves what was recorded before intact.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/sqlite_db.hpp"

namespace muster::daemon {

// Who owns a job, and how musterd knows: "slurm" (squeue says so) or "first_record" (a job
// Slurm does not know, such as a local `muster run`: the uid that first recorded it).
struct job_owner {
  uid_t uid = 0;
  std::string source;
};

// One job step as the node saw it. state: running, completed, failed, cancelled.
struct step_entry {
  std::string job_id;
  std::string step_id;
  uid_t uid = 0;
  std::int64_t pid = 0;
  std::string run_dir;
  std::int64_t num_ranks = 0;  // ranks on this node
  std::string state = "running";
  std::int64_t started_ms = 0;
  std::optional<std::int64_t> ended_ms;
  std::optional<std::int64_t> exit_code;
  std::string message;
};

// One environment decision sent to a job step (action: set, unset, keep, error, setting).
struct decision_entry {
  std::int64_t time_ms = 0;
  std::string job_id, step_id, rule, action, name, value, reason;
};

// One preflight: passed or not, and every check as the JSON array the reply carried.
struct preflight_entry {
  std::int64_t time_ms = 0;
  std::string job_id, step_id;
  bool passed = false;
  std::string checks_json;
};

// One observation about the node's health: an Xid in the kernel log, an ECC count, a GPU
// holding memory of a dead job. gpu is -1 for the node.
struct health_entry {
  std::int64_t time_ms = 0;
  std::string kind;
  std::int64_t gpu = -1;
  std::string message;
};

class node_store {
 public:
  // Opens (creating it and its directory, both for root's eyes only: 0700 and 0600) and
  // migrates `file`; then prunes. Throws errc::store.
  node_store(const std::filesystem::path& file, int keep_days);

  // Drops records older than `keep_days`, and the owners of jobs with no records left.
  void prune(int keep_days);

  std::optional<job_owner> owner_of(const std::string& job_id);
  void set_owner(const std::string& job_id, const job_owner& owner, std::int64_t time_ms);

  // A step starts (a step id seen again, as after a requeue, starts afresh).
  void step_started(const step_entry& step);
  // A step ends; false when no such step was started.
  bool step_ended(const step_entry& step);
  // The job has ended on this node (Slurm's epilog): its steps still running are marked
  // cancelled at `ended_ms` with `message`. Returns how many were.
  int job_ended(const std::string& job_id, std::int64_t ended_ms, const std::string& message);

  void add_decisions(const std::vector<decision_entry>& decisions);
  void add_preflight(const preflight_entry& preflight);
  void add_health(const std::vector<health_entry>& observations);

  // The newest steps first.
  std::vector<step_entry> recent_steps(int limit);
  // The steps not recorded as ended, oldest first.
  std::vector<step_entry> running_steps();
  std::vector<step_entry> steps_of(const std::string& job_id);
  std::vector<decision_entry> decisions_of(const std::string& job_id);
  std::vector<preflight_entry> preflights_of(const std::string& job_id);
  std::vector<health_entry> recent_health(int limit);

  const std::filesystem::path& file() const { return db_.file(); }

 private:
  std::vector<step_entry> query_steps(store::sqlite_stmt& stmt);

  store::sqlite_db db_;
};

// Runs `write`, a node store write of what a request decided; a store error (a full disk,
// another process's lock) is logged as a warning naming `what`, and false returned: the request
// is still answered, and only the record is lost.
bool write_or_warn(std::string_view what, const std::function<void()>& write);

}  // namespace muster::daemon
