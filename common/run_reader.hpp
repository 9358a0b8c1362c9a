// run_reader: the merged, read-only view of a run directory's node files (`node-*.db`).
//
// It opens every node file read-only, checks its schema version, and merges on each query:
// ranks by rank, steps by (step, rank), events by time. It never writes, migrates or creates
// a file, so it is safe on a run that is still being written, on one whose writers were
// killed, and in a directory this user cannot write. Each query also looks for node files
// that appeared since the last one (a node whose launcher started late).
//
// Duplicates across files (a requeued job whose rank moved to another node): one record per
// key, the newest; on a tie the one from the first host in host order. Ranks are keyed by rank
// and compared by updated_ms, steps by (step, rank) and compared by time_ms.
//
// How it opens a file: when `<file>-wal` exists (a writer is running, or died), with SQLite's
// mode=ro, which reads the commits still in the WAL and shares its index with a live writer.
// When it does not exist (the writer closed cleanly, so everything is in the main file), with
// immutable=1, which takes no locks and creates no -wal/-shm files, but trusts the file not to
// change. So the reader records the file's inode, size and mtime (nanoseconds) at that open,
// and reopens before a query when a -wal exists or any of them changed (a writer came and
// went), or when the mtime was too recent to prove anything (file times tick coarsely). After
// the query it looks again, and reads the file once more if a writer touched it meanwhile.
//
// Limits: SQLite's WAL needs shared memory between writer and reader, so a reader on another
// host than a live writer (runs_dir on NFS or Lustre) may see stale data; read a live run from
// its node, or after it ended. Not thread-safe: one thread at a time per reader.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/run_store_records.hpp"

namespace muster::store {

class run_reader {
 public:
  // Opens every node-*.db in `run_dir`. Throws errc::io when the directory cannot be listed,
  // errc::store when it holds no node file, or when a file cannot be opened or has a schema
  // version this muster does not read (the message names the file and both versions). A file
  // left empty by a writer that died before creating the schema is read as holding nothing.
  explicit run_reader(const std::filesystem::path& run_dir);
  ~run_reader();
  run_reader(run_reader&&) noexcept;
  run_reader& operator=(run_reader&&) noexcept;

  const std::filesystem::path& dir() const;
  // The hosts that have a node file, sorted. Throws errc::io when the directory cannot be
  // listed, errc::store when a new node file cannot be opened (as every query below).
  std::vector<std::string> hosts() const;

  // Each node's run record, in host order (nodes that wrote none are skipped).
  std::vector<run_record> runs() const;
  // The most recently updated of runs(), or none.
  std::optional<run_record> run() const;
  // Every rank, ordered by rank; one per rank, the newest (see duplicates, above).
  std::vector<rank_record> ranks() const;
  // Every step, ordered by (step, rank); one per (step, rank), the newest.
  std::vector<step_record> steps() const;
  // The steps from first_step to last_step (both included), of one rank or of all; ordered by
  // (step, rank); one per (step, rank), the newest.
  std::vector<step_record> steps(std::int64_t first_step, std::int64_t last_step,
                                 std::optional<std::int64_t> rank = std::nullopt) const;
  // For each rank with at least one step, its highest step (the newest row of it); ordered by
  // rank.
  std::vector<step_record> last_steps() const;
  // The events at or after `since_ms`, ordered by time (ties: host order, then write order).
  std::vector<event_record> events(epoch_ms since_ms = 0) const;
  // The ranks' errors (common/worker_error.hpp), ordered by time (ties: host order).
  std::vector<error_record> errors() const;

  // Runs SQLite's `PRAGMA integrity_check` on every file: "ok" when all pass, else one line
  // per problem, each starting with the file's path.
  std::string integrity_check() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace muster::store
