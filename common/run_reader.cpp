// run_reader: see run_reader.hpp. Each query runs on every node file in turn and the results
// are merged here; files are small enough (one node's ranks) that a sort beats cleverness.
#include "common/run_reader.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "common/error.hpp"
#include "common/run_dir.hpp"
#include "common/run_store_schema.hpp"
#include "common/sqlite_db.hpp"

namespace muster::store {
namespace {

constexpr int kBusyTimeoutMs = 5000;

constexpr std::string_view kRunSql =
    "SELECT run_id, name, state, created_ms, updated_ms, world_size, num_nodes, slurm_job_id, "
    "config_path, config_text FROM runs ORDER BY updated_ms";
constexpr std::string_view kRanksSql =
    "SELECT rank, host, local_rank, pid, state, exit_code, signal, updated_ms FROM ranks "
    "ORDER BY rank";
constexpr std::string_view kStepColumns =
    "s.rank, s.step, s.loss, s.tokens, s.step_time_s, s.mem_bytes, s.time_ms";
constexpr std::string_view kStepsWhere =
    "WHERE s.step BETWEEN ?1 AND ?2 AND (?3 IS NULL OR s.rank = ?3) ORDER BY s.step, s.rank";
// One index seek per rank, thanks to the (rank, step) primary key.
constexpr std::string_view kLastStepsJoin =
    "JOIN ranks r ON s.rank = r.rank "
    "AND s.step = (SELECT max(step) FROM steps WHERE rank = r.rank) ORDER BY s.rank";
constexpr std::string_view kEventsSql =
    "SELECT time_ms, rank, severity, kind, message FROM events WHERE time_ms >= ?1 "
    "ORDER BY time_ms, id";

// One node file and its read-only connection.
struct node_file {
  std::string host;
  std::filesystem::path file;
  std::optional<sqlite_db> db;
  bool immutable = false;  // opened with immutable=1: no writer had the file open then
  bool empty = false;      // no schema yet: holds nothing

  bool has_wal() const {
    std::error_code ec;
    return std::filesystem::exists(file.string() + "-wal", ec);
  }

  void open() {
    immutable = !has_wal();
    db.reset();  // close the old connection first
    db.emplace(file, immutable ? open_mode::read_immutable : open_mode::read_only);
    db->set_busy_timeout(kBusyTimeoutMs);
    db->exec("PRAGMA query_only = ON", "make the connection query-only");
    empty = !schema::check_readable(*db);
  }

  // Reopens with mode=ro when a writer has started since the file was opened immutable, and
  // looks again at a file that was empty: its writer may have created the schema since.
  void refresh() {
    if (immutable && has_wal()) {
      open();
    } else if (empty) {
      empty = !schema::check_readable(*db);
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
  return step_record{s.column_int64(0),  s.column_int64(1),  s.column_double(2),
                     s.column_int64(3),  s.column_double(4), s.column_int64(5),
                     s.column_int64(6)};
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

}  // namespace

struct run_reader::impl {
  std::filesystem::path dir;
  std::vector<node_file> nodes;  // sorted by host

  explicit impl(const std::filesystem::path& run_dir) : dir(run_dir) {
    for (const auto& file : run_paths(run_dir).node_dbs()) {
      node_file& node = nodes.emplace_back();
      node.host = node_db_host(file);
      node.file = file;
      node.open();
    }
    MUSTER_CHECK(!nodes.empty(), errc::store,
                 "run directory {} holds no node-*.db file: no launcher has started there, or "
                 "it is not a run directory",
                 dir.string());
  }

  // Calls query(node, stmt) for every node file that holds a schema, with `sql` prepared.
  template <class F>
  void for_each_node(std::string_view sql, F&& query) {
    for (node_file& node : nodes) {
      node.refresh();
      if (node.empty) continue;
      sqlite_stmt stmt = node.db->prepare(sql);
      query(node, stmt);
    }
  }
};

run_reader::run_reader(const std::filesystem::path& run_dir)
    : impl_(std::make_unique<impl>(run_dir)) {}

run_reader::~run_reader() = default;
run_reader::run_reader(run_reader&&) noexcept = default;
run_reader& run_reader::operator=(run_reader&&) noexcept = default;

const std::filesystem::path& run_reader::dir() const { return impl_->dir; }

std::vector<std::string> run_reader::hosts() const {
  std::vector<std::string> hosts;
  for (const node_file& node : impl_->nodes) hosts.push_back(node.host);
  return hosts;
}

std::vector<run_record> run_reader::runs() const {
  std::vector<run_record> runs;
  impl_->for_each_node(kRunSql, [&](const node_file& node, sqlite_stmt& s) {
    s.for_each_row("read run", [&] { runs.push_back(read_run(node, s)); });
  });
  return runs;
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
  std::map<std::int64_t, rank_record> by_rank;
  impl_->for_each_node(kRanksSql, [&](const node_file& node, sqlite_stmt& s) {
    s.for_each_row("read ranks", [&] {
      rank_record rank = read_rank(node, s);
      auto [it, inserted] = by_rank.try_emplace(rank.rank, rank);
      if (!inserted && it->second.updated_ms < rank.updated_ms) it->second = std::move(rank);
    });
  });
  std::vector<rank_record> ranks;
  for (auto& [number, rank] : by_rank) ranks.push_back(std::move(rank));
  return ranks;
}

std::vector<step_record> run_reader::steps() const {
  return steps(std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max());
}

std::vector<step_record> run_reader::steps(std::int64_t first_step, std::int64_t last_step,
                                           std::optional<std::int64_t> rank) const {
  std::vector<step_record> steps;
  std::string sql = fmt::format("SELECT {} FROM steps s {}", kStepColumns, kStepsWhere);
  impl_->for_each_node(sql, [&](const node_file&, sqlite_stmt& s) {
    s.bind(1, first_step);
    s.bind(2, last_step);
    s.bind(3, rank);
    s.for_each_row("read steps", [&] { steps.push_back(read_step(s)); });
  });
  std::stable_sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) {
    return std::pair(a.step, a.rank) < std::pair(b.step, b.rank);
  });
  return steps;
}

std::vector<step_record> run_reader::last_steps() const {
  std::map<std::int64_t, step_record> by_rank;
  std::string sql = fmt::format("SELECT {} FROM steps s {}", kStepColumns, kLastStepsJoin);
  impl_->for_each_node(sql, [&](const node_file&, sqlite_stmt& s) {
    s.for_each_row("read last steps", [&] {
      step_record step = read_step(s);
      auto [it, inserted] = by_rank.try_emplace(step.rank, step);
      if (!inserted && it->second.step < step.step) it->second = step;
    });
  });
  std::vector<step_record> steps;
  for (auto& [rank, step] : by_rank) steps.push_back(step);
  return steps;
}

std::vector<event_record> run_reader::events(epoch_ms since_ms) const {
  std::vector<event_record> events;
  impl_->for_each_node(kEventsSql, [&](const node_file& node, sqlite_stmt& s) {
    s.bind(1, since_ms);
    s.for_each_row("read events", [&] { events.push_back(read_event(node, s)); });
  });
  std::stable_sort(events.begin(), events.end(),
                   [](const auto& a, const auto& b) { return a.time_ms < b.time_ms; });
  return events;
}

std::string run_reader::integrity_check() const {
  std::vector<std::string> problems;
  for (node_file& node : impl_->nodes) {
    node.refresh();
    sqlite_stmt s = node.db->prepare("PRAGMA integrity_check");
    s.for_each_row("check integrity", [&] {
      if (std::string line = s.column_text(0); line != "ok") {
        problems.push_back(fmt::format("{}: {}", node.file.string(), line));
      }
    });
  }
  if (problems.empty()) return "ok";
  std::string text;
  for (const std::string& line : problems) text += (text.empty() ? "" : "\n") + line;
  return text;
}

}  // namespace muster::store
