// node_writer: the one writer of one node's run-store file, `<run_dir>/node-<hostname>.db`.
//
// The run store keeps what `muster status` and post-mortems need: the run, its ranks, the
// per-step metrics and the events. Each node's launcher writes its own SQLite file, so no file
// is ever written from two hosts; run_reader (run_reader.hpp) merges the files of a run.
// This header is the typed write API; there is no SQL outside common/run_store*.cpp,
// common/run_reader.cpp and common/sqlite_db.cpp.
//
// Durability: the file is in WAL mode with synchronous=NORMAL. A transaction that returned has
// been written to the WAL with write(2), so it survives the process dying at any point
// (SIGKILL, abort, OOM kill): the kernel holds the data. It is NOT fsync'ed per commit, so a
// power loss or kernel crash can lose the last commits (the file stays consistent, it only
// rolls back). That is the right trade for metrics written every step; the WAL is synced at
// each checkpoint. See tests/integration/test_run_store_sigkill.cpp for the crash test.
//
// Not thread-safe: one thread at a time per node_writer. One node_writer per file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string_view>

#include "common/run_store_records.hpp"

namespace muster::store {

// The schema version this muster writes and reads (`PRAGMA user_version`).
inline constexpr int kSchemaVersion = 5;

struct writer_options {
  int busy_timeout_ms = 5000;  // wait this long for a lock held by another connection
  std::int64_t max_bytes = 0;  // > 0: fail with SQLITE_FULL beyond about this file size
};

class node_writer {
 public:
  // Opens `file`, creating it when missing, in WAL mode, and migrates it to kSchemaVersion.
  // Throws errc::store (the message names the file, what failed and what to do) when the file
  // or its directory is not writable, when it is not an SQLite file, when it is another
  // program's SQLite file, or when it was written by a newer muster (the message names both
  // schema versions); a file refused for its contents is left unchanged.
  explicit node_writer(const std::filesystem::path& file, const writer_options& options = {});
  ~node_writer();
  node_writer(node_writer&&) noexcept;
  node_writer& operator=(node_writer&&) noexcept;

  // Inserts or replaces the run, keeping the earliest created_ms: a job requeued (or run again
  // in its run directory) started when it first did. A node file belongs to one run: a record
  // with another run_id than the one already stored throws errc::store.
  void put_run(const run_record& run);
  // Sets the state and updated_ms of the stored run. Throws errc::store when no run with
  // `run_id` is stored.
  void set_run_state(std::string_view run_id, run_state state, epoch_ms updated_ms);
  // Inserts or replaces the rank with record.rank (all fields are replaced).
  void put_rank(const rank_record& rank);
  // Inserts one step, replacing an earlier row with the same (rank, step). The rank must have
  // been put before (errc::store otherwise, whose message says to put_rank first).
  void add_step(const step_record& step);
  // Inserts steps in one transaction: all of them are stored, or (on error) none.
  void add_steps(std::span<const step_record> steps);
  // Appends an event. Events are never replaced.
  void add_event(const event_record& event);
  // Appends a rank's error. Errors are never replaced.
  void add_error(const error_record& error);

  // The schema version of the file (kSchemaVersion once opened).
  int schema_version() const;
  const std::filesystem::path& file() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace muster::store
