// musterd's node store: see node_store.hpp.
//
// To change the schema, append a migration with the next version. Never edit one that has
// shipped: node files in the field were made by it.
#include "daemon/node_store.hpp"
#include "common/run_store_records.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <string_view>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/sqlite_schema.hpp"

namespace muster::daemon {
namespace {

using store::sqlite_stmt;

// v1. STRICT tables; times are epoch milliseconds; job and step ids are text (Slurm's "123",
// "123_4" for array tasks, or a local run's id).
constexpr std::string_view kVersion1 = R"sql(
CREATE TABLE jobs (
  job_id      TEXT PRIMARY KEY NOT NULL,
  uid         INTEGER NOT NULL,
  source      TEXT NOT NULL,
  seen_ms     INTEGER NOT NULL
) STRICT;

CREATE TABLE steps (
  job_id      TEXT NOT NULL,
  step_id     TEXT NOT NULL,
  uid         INTEGER NOT NULL,
  pid         INTEGER NOT NULL,
  run_dir     TEXT NOT NULL,
  num_ranks   INTEGER NOT NULL,
  state       TEXT NOT NULL,
  started_ms  INTEGER NOT NULL,
  ended_ms    INTEGER,
  exit_code   INTEGER,
  message     TEXT NOT NULL,
  PRIMARY KEY (job_id, step_id)
) STRICT;
CREATE INDEX steps_by_start ON steps (started_ms);

CREATE TABLE decisions (
  id       INTEGER PRIMARY KEY,
  time_ms  INTEGER NOT NULL,
  job_id   TEXT NOT NULL,
  step_id  TEXT NOT NULL,
  rule     TEXT NOT NULL,
  action   TEXT NOT NULL,
  name     TEXT NOT NULL,
  value    TEXT NOT NULL,
  reason   TEXT NOT NULL
) STRICT;
CREATE INDEX decisions_by_job ON decisions (job_id);

CREATE TABLE preflights (
  id       INTEGER PRIMARY KEY,
  time_ms  INTEGER NOT NULL,
  job_id   TEXT NOT NULL,
  step_id  TEXT NOT NULL,
  passed   INTEGER NOT NULL,
  checks   TEXT NOT NULL
) STRICT;
CREATE INDEX preflights_by_job ON preflights (job_id);

CREATE TABLE health (
  id       INTEGER PRIMARY KEY,
  time_ms  INTEGER NOT NULL,
  kind     TEXT NOT NULL,
  gpu      INTEGER NOT NULL,
  message  TEXT NOT NULL
) STRICT;
CREATE INDEX health_by_time ON health (time_ms);
)sql";

constexpr std::array kMigrations{store::sqlite_migration{1, kVersion1}};

const store::sqlite_schema kNodeStoreSchema{
    "node store", kMigrations, "move it away; musterd makes a new one at its next start"};

// `file`, once its directory exists (made 0700 when this creates it: the store is root's) and
// the file too (0600), before SQLite opens it with the umask's mode.
std::filesystem::path with_directory(const std::filesystem::path& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (file.has_parent_path() && !fs::exists(file.parent_path(), ec) &&
      fs::create_directories(file.parent_path(), ec))
    fs::permissions(file.parent_path(), fs::perms::owner_all, ec);
  if (!fs::exists(file, ec)) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) ::close(fd);
  }
  return file;
}

constexpr std::string_view kStepColumns =
    "job_id, step_id, uid, pid, run_dir, num_ranks, state, started_ms, ended_ms, exit_code, "
    "message";

}  // namespace

node_store::node_store(const std::filesystem::path& file, int keep_days)
    : db_(with_directory(file), store::open_mode::read_write, store::kNodeStoreWords) {
  db_.set_busy_timeout(2000);
  store::check_writable(db_, kNodeStoreSchema);
  const auto mode = db_.query_text("PRAGMA journal_mode = WAL", "switch to WAL mode");
  MUSTER_CHECK(mode == "wal", errc::store,
               "node store {}: the filesystem refused WAL mode (journal_mode is '{}'); put "
               "daemon.state_dir on a local filesystem",
               file.string(), mode.value_or("?"));
  db_.exec("PRAGMA synchronous = NORMAL", "set synchronous");
  store::migrate(db_, kNodeStoreSchema);
  prune(keep_days);
}

void node_store::prune(int keep_days) {
  const auto cutoff = store::now_ms() - std::int64_t{keep_days} * 86'400'000;
  store::sqlite_transaction transaction(db_);
  // a job's owner goes with its last record, never before: a record without its owner would
  // be anyone's to claim
  for (const char* sql :
       {"DELETE FROM steps WHERE started_ms < ?1", "DELETE FROM decisions WHERE time_ms < ?1",
        "DELETE FROM preflights WHERE time_ms < ?1", "DELETE FROM health WHERE time_ms < ?1",
        "DELETE FROM jobs WHERE seen_ms < ?1 "
        "AND job_id NOT IN (SELECT job_id FROM steps) "
        "AND job_id NOT IN (SELECT job_id FROM decisions) "
        "AND job_id NOT IN (SELECT job_id FROM preflights)"}) {
    auto stmt = db_.prepare(sql);
    stmt.bind(1, cutoff);
    stmt.execute("drop old records");
  }
  transaction.commit();
}

std::optional<job_owner> node_store::owner_of(const std::string& job_id) {
  auto stmt = db_.prepare("SELECT uid, source FROM jobs WHERE job_id = ?1");
  stmt.bind(1, job_id);
  std::optional<job_owner> owner;
  stmt.for_each_row("read a job's owner", [&] {
    owner = job_owner{static_cast<uid_t>(stmt.column_int64(0)), stmt.column_text(1)};
  });
  return owner;
}

void node_store::set_owner(const std::string& job_id, const job_owner& owner,
                           std::int64_t time_ms) {
  auto stmt = db_.prepare(
      "INSERT INTO jobs (job_id, uid, source, seen_ms) VALUES (?1, ?2, ?3, ?4) "
      "ON CONFLICT (job_id) DO UPDATE SET uid = ?2, source = ?3, seen_ms = ?4");
  stmt.bind(1, job_id);
  stmt.bind(2, std::int64_t{owner.uid});
  stmt.bind(3, owner.source);
  stmt.bind(4, time_ms);
  stmt.execute("record a job's owner");
}

void node_store::step_started(const step_entry& s) {
  auto stmt = db_.prepare(
      "INSERT OR REPLACE INTO steps (job_id, step_id, uid, pid, run_dir, num_ranks, state, "
      "started_ms, ended_ms, exit_code, message) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running', ?7, NULL, NULL, '')");
  stmt.bind(1, s.job_id);
  stmt.bind(2, s.step_id);
  stmt.bind(3, std::int64_t{s.uid});
  stmt.bind(4, s.pid);
  stmt.bind(5, s.run_dir);
  stmt.bind(6, s.num_ranks);
  stmt.bind(7, s.started_ms);
  stmt.execute("record a step's start");
}

bool node_store::step_ended(const step_entry& s) {
  auto stmt = db_.prepare(
      "UPDATE steps SET state = ?3, ended_ms = ?4, exit_code = ?5, message = ?6 "
      "WHERE job_id = ?1 AND step_id = ?2");
  stmt.bind(1, s.job_id);
  stmt.bind(2, s.step_id);
  stmt.bind(3, s.state);
  stmt.bind(4, s.ended_ms);
  stmt.bind(5, s.exit_code);
  stmt.bind(6, s.message);
  stmt.execute("record a step's end");
  return db_.query_int64("SELECT changes()", "count the steps ended") > 0;
}

int node_store::job_ended(const std::string& job_id, std::int64_t ended_ms,
                          const std::string& message) {
  auto stmt = db_.prepare(
      "UPDATE steps SET state = 'cancelled', ended_ms = ?2, message = ?3 "
      "WHERE job_id = ?1 AND state = 'running'");
  stmt.bind(1, job_id);
  stmt.bind(2, ended_ms);
  stmt.bind(3, message);
  stmt.execute("record a job's end");
  return static_cast<int>(db_.query_int64("SELECT changes()", "count the steps ended"));
}

void node_store::add_decisions(const std::vector<decision_entry>& decisions) {
  store::sqlite_transaction transaction(db_);
  auto stmt = db_.prepare(
      "INSERT INTO decisions (time_ms, job_id, step_id, rule, action, name, value, reason) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
  for (const auto& d : decisions) {
    stmt.bind(1, d.time_ms);
    stmt.bind(2, d.job_id);
    stmt.bind(3, d.step_id);
    stmt.bind(4, d.rule);
    stmt.bind(5, d.action);
    stmt.bind(6, d.name);
    stmt.bind(7, d.value);
    stmt.bind(8, d.reason);
    stmt.execute("record a policy decision");
  }
  transaction.commit();
}

void node_store::add_preflight(const preflight_entry& p) {
  auto stmt = db_.prepare(
      "INSERT INTO preflights (time_ms, job_id, step_id, passed, checks) "
      "VALUES (?1, ?2, ?3, ?4, ?5)");
  stmt.bind(1, p.time_ms);
  stmt.bind(2, p.job_id);
  stmt.bind(3, p.step_id);
  stmt.bind(4, std::int64_t{p.passed});
  stmt.bind(5, p.checks_json);
  stmt.execute("record a preflight");
}

void node_store::add_health(const std::vector<health_entry>& observations) {
  store::sqlite_transaction transaction(db_);
  auto stmt =
      db_.prepare("INSERT INTO health (time_ms, kind, gpu, message) VALUES (?1, ?2, ?3, ?4)");
  for (const auto& h : observations) {
    stmt.bind(1, h.time_ms);
    stmt.bind(2, h.kind);
    stmt.bind(3, h.gpu);
    stmt.bind(4, h.message);
    stmt.execute("record a health observation");
  }
  transaction.commit();
}

std::vector<step_entry> node_store::query_steps(sqlite_stmt& stmt) {
  std::vector<step_entry> out;
  stmt.for_each_row("read steps", [&] {
    step_entry s;
    s.job_id = stmt.column_text(0);
    s.step_id = stmt.column_text(1);
    s.uid = static_cast<uid_t>(stmt.column_int64(2));
    s.pid = stmt.column_int64(3);
    s.run_dir = stmt.column_text(4);
    s.num_ranks = stmt.column_int64(5);
    s.state = stmt.column_text(6);
    s.started_ms = stmt.column_int64(7);
    s.ended_ms = stmt.column_optional_int64(8);
    s.exit_code = stmt.column_optional_int64(9);
    s.message = stmt.column_text(10);
    out.push_back(std::move(s));
  });
  return out;
}

std::vector<step_entry> node_store::recent_steps(int limit) {
  auto stmt = db_.prepare(fmt::format(
      "SELECT {} FROM steps ORDER BY started_ms DESC, rowid DESC LIMIT ?1", kStepColumns));
  stmt.bind(1, limit);
  return query_steps(stmt);
}

std::vector<step_entry> node_store::running_steps() {
  auto stmt = db_.prepare(fmt::format(
      "SELECT {} FROM steps WHERE state = 'running' ORDER BY started_ms", kStepColumns));
  return query_steps(stmt);
}

std::vector<step_entry> node_store::steps_of(const std::string& job_id) {
  auto stmt = db_.prepare(
      fmt::format("SELECT {} FROM steps WHERE job_id = ?1 ORDER BY started_ms", kStepColumns));
  stmt.bind(1, job_id);
  return query_steps(stmt);
}

std::vector<decision_entry> node_store::decisions_of(const std::string& job_id) {
  auto stmt = db_.prepare(
      "SELECT time_ms, job_id, step_id, rule, action, name, value, reason FROM decisions "
      "WHERE job_id = ?1 ORDER BY id");
  stmt.bind(1, job_id);
  std::vector<decision_entry> out;
  stmt.for_each_row("read decisions", [&] {
    out.push_back({stmt.column_int64(0), stmt.column_text(1), stmt.column_text(2),
                   stmt.column_text(3), stmt.column_text(4), stmt.column_text(5),
                   stmt.column_text(6), stmt.column_text(7)});
  });
  return out;
}

std::vector<preflight_entry> node_store::preflights_of(const std::string& job_id) {
  auto stmt = db_.prepare(
      "SELECT time_ms, job_id, step_id, passed, checks FROM preflights WHERE job_id = ?1 "
      "ORDER BY id");
  stmt.bind(1, job_id);
  std::vector<preflight_entry> out;
  stmt.for_each_row("read preflights", [&] {
    out.push_back({stmt.column_int64(0), stmt.column_text(1), stmt.column_text(2),
                   stmt.column_int64(3) != 0, stmt.column_text(4)});
  });
  return out;
}

std::vector<health_entry> node_store::recent_health(int limit) {
  auto stmt = db_.prepare(
      "SELECT time_ms, kind, gpu, message FROM health ORDER BY time_ms DESC, id DESC LIMIT ?1");
  stmt.bind(1, limit);
  std::vector<health_entry> out;
  stmt.for_each_row("read health", [&] {
    out.push_back(
        {stmt.column_int64(0), stmt.column_text(1), stmt.column_int64(2), stmt.column_text(3)});
  });
  return out;
}

bool write_or_warn(std::string_view what, const std::function<void()>& write) {
  try {
    write();
    return true;
  } catch (const error& e) {
    if (e.category() != errc::store) throw;
    log::get("daemon")->warn("not recorded ({}), answered all the same: {}", what, e.what());
    return false;
  }
}

}  // namespace muster::daemon
