// run_reader: see run_reader.hpp. Each query runs on every node file in turn and the results
// are merged here; files are small enough (one node's ranks) that a sort beats cleverness.
#include "common/run_reader.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <limits>
#include <tuple>
#include <utility>

#include "common/error.hpp"
#include "common/run_dir.hpp"
#include "common/run_store_schema.hpp"
#include "common/sqlite_db.hpp"

namespace muster::store {
namespace {

constexpr int kBusyTimeoutMs = 5000;

constexpr std::string_view kRunSql =
    "SELECT run_id, name, state, created_ms, updated_ms, world_size, num_nodes, slurm_job_id, "
    "config_path, config_text, slurm_cluster, slurm_task_job_id FROM runs ORDER BY updated_ms";
constexpr std::string_view kRanksSql =
    "SELECT rank, host, local_rank, pid, state, exit_code, signal, updated_ms FROM ranks "
    "ORDER BY rank";
constexpr std::string_view kStepColumns =
    "s.rank, s.step, s.loss, s.tokens, s.step_time_s, s.mem_bytes, s.time_ms, s.aux_loss, "
    "s.z_loss, s.grad_norm, s.lr, s.tokens_per_s, s.mfu, s.peak_mem_bytes, s.comm_wait_s, "
    "s.mem_device";
// Files from schema::kOldestReadable on are read too, the columns they do not have yet as NULL
// (schema::sql_for_version).
constexpr std::string_view kStepsWhere =
    "WHERE s.step BETWEEN ?1 AND ?2 AND (?3 IS NULL OR s.rank = ?3) ORDER BY s.step, s.rank";
// One index seek per rank, thanks to the (rank, step) primary key.
constexpr std::string_view kLastStepsJoin =
    "JOIN ranks r ON s.rank = r.rank "
    "AND s.step = (SELECT max(step) FROM steps WHERE rank = r.rank) ORDER BY s.rank";
constexpr std::string_view kEventsSql =
    "SELECT time_ms, rank, severity, kind, message FROM events WHERE time_ms >= ?1 "
    "ORDER BY time_ms, id";
constexpr std::string_view kErrorsSql =
    "SELECT time_ms, rank, step, phase, kind, message FROM errors ORDER BY time_ms, id";

// What stat(2) says of a node file; a change means a writer touched the main file.
struct file_state {
  dev_t device = 0;
  ino_t inode = 0;  // 0: the file could not be stat'ed
  off_t size = 0;
  timespec mtime{};
  bool operator==(const file_state& o) const {
    return device == o.device && inode == o.inode && size == o.size &&
           mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec;
  }
};

file_state stat_file(const std::filesystem::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return {};
  return {st.st_dev, st.st_ino, st.st_size, st.st_mtim};
}

// File times come from a coarse clock (a kernel tick; an NFS server's own clock), so a write in
// the same tick as the one that set `mtime` may leave the whole state unchanged. A state whose
// mtime is this close to the time it was read proves nothing (git calls such an index entry
// "racily clean"): the file is reopened before each query until its mtime is older.
constexpr std::chrono::seconds kRacyWindow{2};

bool is_racy(const file_state& state, std::chrono::system_clock::time_point seen_at) {
  using namespace std::chrono;
  auto mtime = system_clock::time_point(duration_cast<system_clock::duration>(
      seconds(state.mtime.tv_sec) + nanoseconds(state.mtime.tv_nsec)));
  return mtime + kRacyWindow > seen_at;
}

// One node file and its read-only connection.
//
// A file opened immutable (no -wal: no writer had it open) is read by SQLite without locks and
// with its page cache trusted forever, so a writer that opens, commits, checkpoints into the
// main file and closes (removing -wal again) between two queries, or during one, would leave
// the connection reading stale or torn pages. So around every query on such a connection:
// before it, reopen when -wal exists, the file's state (inode, size, mtime) changed since the
// open, or that state was racy; after it, look again and run the query once more on a fresh
// connection if anything changed while it ran. A connection opened with mode=ro (a -wal was
// there) needs none of this: SQLite's WAL index keeps it consistent.
struct node_file {
  std::string host;
  std::filesystem::path file;
  std::optional<sqlite_db> db;
  bool immutable = false;   // opened with immutable=1: no writer had the file open then
  bool empty = false;       // no schema yet: holds nothing
  int version = 0;          // its schema version (schema::kOldestReadable .. kCurrentVersion)
  file_state opened_state;  // of an immutable connection, when it was opened
  bool racy = false;        // opened_state cannot prove the file unchanged later

  bool has_wal() const {
    std::error_code ec;
    return std::filesystem::exists(file.string() + "-wal", ec);
  }

  void open() {
    db.reset();  // close the old connection first
    opened_state = stat_file(file);
    racy = is_racy(opened_state, std::chrono::system_clock::now());
    immutable = !has_wal();
    db.emplace(file, immutable ? open_mode::read_immutable : open_mode::read_only);
    db->set_busy_timeout(kBusyTimeoutMs);
    db->exec("PRAGMA query_only = ON", "make the connection query-only");
    check();
  }

  // Reads the file's version: an older readable one is read as it is, anything else must be
  // the current one (schema::check_readable says why not).
  void check() {
    version = schema::user_version(*db);
    empty = !schema::check_readable(
        *db, version >= schema::kOldestReadable && version < schema::kCurrentVersion
                 ? version
                 : schema::kCurrentVersion);
  }

  // `sql` as this file's version reads it: the columns it does not have yet are NULL.
  std::string sql_for(std::string_view sql) const { return schema::sql_for_version(sql, version); }

  // Whether an immutable connection may no longer match the file (see above).
  bool stale() const { return immutable && (has_wal() || stat_file(file) != opened_state); }

  // Reopens a connection that may be stale (or racy), and looks again at a file that was
  // empty: its writer may have created the schema since.
  void refresh() {
    if (stale() || (immutable && racy)) {
      open();
    } else if (empty) {
      check();
    }
  }

  // Runs query() (which reads through `db`) on a fresh view of the file and returns what it
  // returned. When the file changed while it ran (it may have read torn pages, or failed on
  // them), reopens and runs it once more; a second change is an error.
  template <class F>
  auto read(F&& query) -> decltype(query()) {
    for (int attempt = 1;; ++attempt) {
      refresh();
      std::optional<decltype(query())> result;
      try {
        result = query();
      } catch (const error&) {
        if (!stale() || attempt == 2) throw;
        continue;
      }
      if (!stale()) return std::move(*result);
      MUSTER_CHECK(attempt < 2, errc::store,
                   "run store {}: the file changed twice while it was read, and no writer "
                   "kept it open; read it again (a writer that opens and closes it in a loop "
                   "makes a live read unreliable)",
                   file.string());
    }
  }
};

template <class Enum>
Enum parse_column(const node_file& node, std::string_view column, std::string_view text,
                  std::optional<Enum> (*parse)(std::string_view)) {
  std::optional<Enum> value = parse(text);
  MUSTER_CHECK(value, errc::store,
               "run store {}: {} holds '{}', which this muster does not know; read this run "
               "with the muster that wrote it",
               node.file.string(), column, text);
  return *value;
}

run_record read_run(const node_file& node, const sqlite_stmt& s) {
  run_record run;
  run.run_id = s.column_text(0);
  run.name = s.column_text(1);
  run.state = parse_column(node, "runs.state", s.column_text(2), parse_run_state);
  run.created_ms = s.column_int64(3);
  run.updated_ms = s.column_int64(4);
  run.world_size = s.column_int64(5);
  run.num_nodes = s.column_int64(6);
  if (!s.column_is_null(7)) run.slurm_job_id = s.column_text(7);
  run.config_path = s.column_text(8);
  run.config_text = s.column_text(9);
  if (!s.column_is_null(10)) run.slurm_cluster = s.column_text(10);
  if (!s.column_is_null(11)) run.slurm_task_job_id = s.column_text(11);
  return run;
}

rank_record read_rank(const node_file& node, const sqlite_stmt& s) {
  rank_record rank;
  rank.rank = s.column_int64(0);
  rank.host = s.column_text(1);
  rank.local_rank = s.column_int64(2);
  rank.pid = s.column_optional_int64(3);
  rank.state = parse_column(node, "ranks.state", s.column_text(4), parse_rank_state);
  rank.exit_code = s.column_optional_int64(5);
  rank.signal = s.column_optional_int64(6);
  rank.updated_ms = s.column_int64(7);
  return rank;
}

step_record read_step(const sqlite_stmt& s) {
  step_record step{s.column_int64(0),   s.column_int64(1),   s.column_double(2),
                   s.column_int64(3),   s.column_double(4),  s.column_int64(5),
                   s.column_int64(6),   s.column_double(7),  s.column_double(8),
                   s.column_double(9),  s.column_double(10), s.column_double(11),
                   s.column_double(12), s.column_int64(13),  s.column_double(14)};
  if (!s.column_is_null(15)) step.mem_device = s.column_text(15);
  return step;
}

event_record read_event(const node_file& node, const sqlite_stmt& s) {
  event_record event;
  event.time_ms = s.column_int64(0);
  event.rank = s.column_optional_int64(1);
  event.level = parse_column(node, "events.severity", s.column_text(2), parse_severity);
  event.kind = s.column_text(3);
  event.message = s.column_text(4);
  return event;
}

// Merges rows from several node files: sorts them by `before` (stable, so ties keep the host
// order they were collected in) and keeps the first row of each run that `same_key` groups.
template <class Row, class Before, class SameKey>
std::vector<Row> first_per_key(std::vector<Row> rows, Before before, SameKey same_key) {
  std::stable_sort(rows.begin(), rows.end(), before);
  rows.erase(std::unique(rows.begin(), rows.end(), same_key), rows.end());
  return rows;
}

// Orders steps by (step, rank) and keeps one row per (step, rank): the one with the latest
// time_ms, or on a tie the first in `steps` (which comes in host order).
std::vector<step_record> newest_per_step(std::vector<step_record> steps) {
  return first_per_key(
      std::move(steps),
      [](const auto& a, const auto& b) {
        return std::tuple(a.step, a.rank, b.time_ms) < std::tuple(b.step, b.rank, a.time_ms);
      },
      [](const auto& a, const auto& b) { return a.step == b.step && a.rank == b.rank; });
}

// Groups rows of the same rank.
constexpr auto same_rank = [](const auto& a, const auto& b) { return a.rank == b.rank; };

}  // namespace

struct run_reader::impl {
  std::filesystem::path dir;
  std::vector<node_file> nodes;  // sorted by host

  explicit impl(const std::filesystem::path& run_dir) : dir(run_dir) {
    discover();
    MUSTER_CHECK(!nodes.empty(), errc::store,
                 "run directory {} holds no node-*.db file: no launcher has started there, or "
                 "it is not a run directory",
                 dir.string());
  }

  // Opens the node files that appeared since the last look (a node whose launcher started
  // after this reader), keeping `nodes` sorted by host.
  void discover() {
    for (const auto& file : run_paths(dir).node_dbs()) {
      std::string host = node_db_host(file);
      auto at =
          std::lower_bound(nodes.begin(), nodes.end(), host,
                           [](const node_file& n, const std::string& h) { return n.host < h; });
      if (at != nodes.end() && at->host == host) continue;
      node_file node;
      node.host = std::move(host);
      node.file = file;
      node.open();
      nodes.insert(at, std::move(node));
    }
  }

  // For every node file that holds a schema, in host order: prepares `sql`, lets
  // query(node, stmt, rows) append that file's rows, and returns all rows. A file's rows are
  // taken only from a read that no writer disturbed (see node_file::read).
  template <class Row, class F>
  std::vector<Row> collect(std::string_view sql, F&& query) {
    discover();
    std::vector<Row> rows;
    for (node_file& node : nodes) {
      std::vector<Row> part = node.read([&] {
        std::vector<Row> found;
        if (node.empty) return found;
        sqlite_stmt stmt = node.db->prepare(node.sql_for(sql));
        query(std::as_const(node), stmt, found);
        return found;
      });
      rows.insert(rows.end(), std::make_move_iterator(part.begin()),
                  std::make_move_iterator(part.end()));
    }
    return rows;
  }
};

run_reader::run_reader(const std::filesystem::path& run_dir)
    : impl_(std::make_unique<impl>(run_dir)) {}

run_reader::~run_reader() = default;
run_reader::run_reader(run_reader&&) noexcept = default;
run_reader& run_reader::operator=(run_reader&&) noexcept = default;

const std::filesystem::path& run_reader::dir() const {
  return impl_->dir;
}

std::vector<std::string> run_reader::hosts() const {
  impl_->discover();
  std::vector<std::string> hosts;
  for (const node_file& node : impl_->nodes) hosts.push_back(node.host);
  return hosts;
}

std::vector<run_record> run_reader::runs() const {
  return impl_->collect<run_record>(kRunSql, [](const node_file& node, sqlite_stmt& s, auto& out) {
    s.for_each_row("read run", [&] { out.push_back(read_run(node, s)); });
  });
}

std::optional<run_record> run_reader::run() const {
  std::vector<run_record> all = runs();
  auto latest = std::max_element(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.updated_ms < b.updated_ms;
  });
  if (latest == all.end()) return std::nullopt;
  return *latest;
}

std::vector<rank_record> run_reader::ranks() const {
  auto all =
      impl_->collect<rank_record>(kRanksSql, [](const node_file& node, sqlite_stmt& s, auto& out) {
        s.for_each_row("read ranks", [&] { out.push_back(read_rank(node, s)); });
      });
  // Newest wins; on a tie the first host (rows come in host order, stable_sort keeps it).
  return first_per_key(
      std::move(all),
      [](const auto& a, const auto& b) {
        return std::pair(a.rank, b.updated_ms) < std::pair(b.rank, a.updated_ms);
      },
      same_rank);
}

std::vector<step_record> run_reader::steps() const {
  return steps(std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max());
}

std::vector<step_record> run_reader::steps(std::int64_t first_step, std::int64_t last_step,
                                           std::optional<std::int64_t> rank) const {
  std::string sql = fmt::format("SELECT {} FROM steps s {}", kStepColumns, kStepsWhere);
  auto all = impl_->collect<step_record>(sql, [&](const node_file&, sqlite_stmt& s, auto& out) {
    s.bind(1, first_step);
    s.bind(2, last_step);
    s.bind(3, rank);
    s.for_each_row("read steps", [&] { out.push_back(read_step(s)); });
  });
  return newest_per_step(std::move(all));
}

std::vector<step_record> run_reader::last_steps() const {
  std::string sql = fmt::format("SELECT {} FROM steps s {}", kStepColumns, kLastStepsJoin);
  auto all = impl_->collect<step_record>(sql, [](const node_file&, sqlite_stmt& s, auto& out) {
    s.for_each_row("read last steps", [&] { out.push_back(read_step(s)); });
  });
  // The highest step of each rank over all files; the newest row of it when files disagree.
  return first_per_key(
      std::move(all),
      [](const auto& a, const auto& b) {
        return std::tuple(a.rank, b.step, b.time_ms) < std::tuple(b.rank, a.step, a.time_ms);
      },
      same_rank);
}

std::vector<event_record> run_reader::events(epoch_ms since_ms) const {
  auto events = impl_->collect<event_record>(
      kEventsSql, [&](const node_file& node, sqlite_stmt& s, auto& out) {
        s.bind(1, since_ms);
        s.for_each_row("read events", [&] { out.push_back(read_event(node, s)); });
      });
  std::stable_sort(events.begin(), events.end(),
                   [](const auto& a, const auto& b) { return a.time_ms < b.time_ms; });
  return events;
}

std::vector<error_record> run_reader::errors() const {
  auto errors =
      impl_->collect<error_record>(kErrorsSql, [&](const node_file&, sqlite_stmt& s, auto& out) {
        s.for_each_row("read errors", [&] {
          out.push_back({s.column_int64(0), s.column_int64(1), s.column_optional_int64(2),
                         s.column_text(3), s.column_text(4), s.column_text(5)});
        });
      });
  std::stable_sort(errors.begin(), errors.end(),
                   [](const auto& a, const auto& b) { return a.time_ms < b.time_ms; });
  return errors;
}

std::string run_reader::integrity_check() const {
  std::vector<std::string> problems = impl_->collect<std::string>(
      "PRAGMA integrity_check", [](const node_file& node, sqlite_stmt& s, auto& out) {
        s.for_each_row("check integrity", [&] {
          if (std::string line = s.column_text(0); line != "ok") {
            out.push_back(fmt::format("{}: {}", node.file.string(), line));
          }
        });
      });
  if (problems.empty()) return "ok";
  std::string text;
  for (const std::string& line : problems) text += (text.empty() ? "" : "\n") + line;
  return text;
}

}  // namespace muster::store
