// What a node's launcher writes to its run-store file while its ranks run: each rank's start
// and end, the first failure (with its error file and last output lines) and its knock-ons,
// forwarded signals, hangs and kills; and the summary it prints on stderr at the end.
// A store that cannot be written any more (a full disk) does not stop the run: the first such
// error is printed once, with its fix, the ranks go on, and what was recorded stays.
// Not here: starting or stopping workers (supervisor.hpp), the run directory (common/run_dir).
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/run_store.hpp"
#include "common/run_dir.hpp"
#include "launcher/supervisor.hpp"

namespace muster::launcher {

// What ends a first_failure event's message before the rank's last output lines (joined by
// " | "), for readers that show it apart (muster status).
inline constexpr std::string_view kLastOutput = "; last output: ";

// The last output a first_failure event's message holds, its last 400 characters ("..." before
// them where it is longer), for people; nothing when the message holds none.
std::optional<std::string> last_output_tail(std::string_view message);

class run_recorder {
 public:
  // Ranks first_rank .. on `host` write to `db`; their files are under paths.
  run_recorder(store::node_writer& db, const store::run_paths& paths, std::string host,
               int first_rank);
  ~run_recorder();
  run_recorder(const run_recorder&) = delete;
  run_recorder& operator=(const run_recorder&) = delete;

  void operator()(const supervisor_event& e);
  // An event of the run (not of one rank when rank is unset).
  void event(std::optional<int> rank, store::severity level, std::string kind, std::string text);

  // Per-step records of this node's ranks, in one transaction.
  void steps(const std::vector<store::step_record>& batch);
  // Sets the run's final state.
  void set_state(const std::string& run_id, store::run_state state);
  // The first error writing the store, when there was one.
  const std::optional<std::string>& store_error() const { return store_error_; }

  const std::string& host() const { return host_; }
  // The error file of the latest first failure, as read when it was recorded.
  const std::optional<std::string>& first_error() const { return first_error_; }
  // A rank of this node that had ended well well before the first failure (ended_early's words).
  const std::optional<std::string>& ended_early_note() const { return ended_early_; }

 private:
  void put_rank(int rank, pid_t pid, store::rank_state state, const rank_exit* exit);
  void on_exit(const rank_exit& x);
  // Runs a store write (owning what it writes). Once the disk is full, step records are
  // dropped and essential ones (the ranks, events, errors) kept in order until the run's end,
  // set_state, which frees the room kept for them (reserve_) and writes them first.
  void write(std::function<void()> f, bool essential = true);
  void write_pending();

  store::node_writer& db_;
  const store::run_paths& paths_;
  std::string host_;
  int first_rank_;
  std::optional<std::string> first_error_;
  std::optional<rank_exit> first_success_;  // the first rank of this node that ended well
  std::optional<std::string> ended_early_;
  std::optional<std::string> store_error_;
  bool full_ = false;              // a write found the disk full
  std::string stopped_by_;         // what stopped the ranks, when not a rank's failure here
  std::filesystem::path reserve_;  // the room kept for the run's end; empty once freed
  std::vector<std::function<void()>> pending_;  // essential writes the full disk held back
};

// The end of a run on stderr: who failed first, the log, the error file, the last lines.
// `elsewhere`: the first failure was on another node (muster launch), as it was published.
void print_summary(const supervise_result& result, const store::run_paths& paths,
                   const run_recorder& recorder, const std::optional<std::string>& elsewhere);

}  // namespace muster::launcher
