// The run store's schema and its migrations: see run_store_schema.hpp.
//
// To change the schema, append a migration with the next version, raise kCurrentVersion, and
// teach the reader the new columns. Never edit a migration that has shipped: files in the
// field were made by it.
#include "common/run_store_schema.hpp"

#include <array>
#include <cctype>
#include <string_view>

#include "common/sqlite_schema.hpp"

namespace muster::store::schema {
namespace {

// The columns readers name that a version added, as they name them.
struct added_column {
  int version;  // the first version that has it
  std::string_view column;
};
constexpr added_column kAddedColumns[] = {
    {3, "s.comm_wait_s"}, {4, "slurm_cluster"}, {4, "slurm_task_job_id"}, {5, "s.mem_device"}};

// v1: one file per node and run. Tables are STRICT so a wrong type is an error, not a
// silent conversion. Enum columns hold the names from run_store_records.hpp as text (readable
// in the sqlite3 shell; new states need no table rebuild). Times are epoch milliseconds.
constexpr std::string_view kVersion1 = R"sql(
CREATE TABLE runs (
  run_id       TEXT PRIMARY KEY NOT NULL,
  name         TEXT NOT NULL,
  state        TEXT NOT NULL,
  created_ms   INTEGER NOT NULL,
  updated_ms   INTEGER NOT NULL,
  world_size   INTEGER NOT NULL,
  num_nodes    INTEGER NOT NULL,
  slurm_job_id TEXT,
  config_path  TEXT NOT NULL,
  config_text  TEXT NOT NULL
) STRICT;

CREATE TABLE ranks (
  rank       INTEGER PRIMARY KEY NOT NULL,
  host       TEXT NOT NULL,
  local_rank INTEGER NOT NULL,
  pid        INTEGER,
  state      TEXT NOT NULL,
  exit_code  INTEGER,
  signal     INTEGER,
  updated_ms INTEGER NOT NULL
) STRICT;

-- loss is NULL when it was NaN (SQLite stores no NaN).
CREATE TABLE steps (
  rank        INTEGER NOT NULL REFERENCES ranks (rank),
  step        INTEGER NOT NULL,
  loss        REAL,
  tokens      INTEGER NOT NULL,
  step_time_s REAL NOT NULL,
  mem_bytes   INTEGER NOT NULL,
  time_ms     INTEGER NOT NULL,
  PRIMARY KEY (rank, step)
) STRICT, WITHOUT ROWID;
CREATE INDEX steps_by_step ON steps (step);

-- rank is NULL for the node or its launcher. No foreign key: an event about a rank must be
-- recordable even before (or instead of) its rank row.
CREATE TABLE events (
  id       INTEGER PRIMARY KEY,
  time_ms  INTEGER NOT NULL,
  rank     INTEGER,
  severity TEXT NOT NULL,
  kind     TEXT NOT NULL,
  message  TEXT NOT NULL
) STRICT;
CREATE INDEX events_by_time ON events (time_ms);
)sql";

// v2: the engine's step metrics beside the loss (router losses, gradient norm, learning rate,
// throughput, MFU, peak memory; NULL where a worker does not report them) and the errors the
// workers leave in their error files, with the phase and step they failed in.
constexpr std::string_view kVersion2 = R"sql(
ALTER TABLE steps ADD COLUMN aux_loss REAL;
ALTER TABLE steps ADD COLUMN z_loss REAL;
ALTER TABLE steps ADD COLUMN grad_norm REAL;
ALTER TABLE steps ADD COLUMN lr REAL;
ALTER TABLE steps ADD COLUMN tokens_per_s REAL;
ALTER TABLE steps ADD COLUMN mfu REAL;
ALTER TABLE steps ADD COLUMN peak_mem_bytes INTEGER NOT NULL DEFAULT 0;

-- One row per failed rank that left an error file. step is NULL before the first step.
CREATE TABLE errors (
  id       INTEGER PRIMARY KEY,
  time_ms  INTEGER NOT NULL,
  rank     INTEGER NOT NULL,
  step     INTEGER,
  phase    TEXT NOT NULL,
  kind     TEXT NOT NULL,
  message  TEXT NOT NULL
) STRICT;
CREATE INDEX errors_by_time ON errors (time_ms);
)sql";

// v3: of each step's wall time, the time the rank was blocked in collectives: a straggler's is
// short while the others wait for it (their step times are all alike in synchronous training).
constexpr std::string_view kVersion3 = R"sql(
ALTER TABLE steps ADD COLUMN comm_wait_s REAL;
)sql";

// v4: the Slurm cluster of a run's job (SLURM_CLUSTER_NAME), so `muster status` asks that
// cluster's squeue (`--clusters`) where one login node sees several clusters' run directories;
// and an array task's own job id (SLURM_JOB_ID: 1241 where slurm_job_id reads 1234_7), which
// `%j` puts in output file names, so `muster status 1241` finds the run.
constexpr std::string_view kVersion4 = R"sql(
ALTER TABLE runs ADD COLUMN slurm_cluster TEXT;
ALTER TABLE runs ADD COLUMN slurm_task_job_id TEXT;
)sql";

// v5: what a step's mem_bytes and peak_mem_bytes measured ("cuda": the CUDA caching
// allocator's reserved bytes; "cpu": the process's resident memory; NULL: not said), so a
// comparison with the planner's per-GPU estimate compares like with like.
constexpr std::string_view kVersion5 = R"sql(
ALTER TABLE steps ADD COLUMN mem_device TEXT;
)sql";

constexpr std::array kMigrations{
    sqlite_migration{1, kVersion1}, sqlite_migration{2, kVersion2}, sqlite_migration{3, kVersion3},
    sqlite_migration{4, kVersion4}, sqlite_migration{5, kVersion5},
};
static_assert(kMigrations.back().to_version == kCurrentVersion,
              "the last migration must produce kCurrentVersion");

const sqlite_schema& run_store_schema() {
  static const sqlite_schema schema{"run store", kMigrations, "move it out of the run directory"};
  return schema;
}

}  // namespace

int user_version(const sqlite_db& db) {
  return store::user_version(db);
}

void check_writable(sqlite_db& db) {
  store::check_writable(db, run_store_schema());
}

void migrate(sqlite_db& db) {
  store::migrate(db, run_store_schema());
}

bool check_readable(const sqlite_db& db, int readable) {
  return store::check_readable(db, run_store_schema(), readable);
}

std::string sql_for_version(std::string_view sql, int version) {
  std::string out(sql);
  const auto name_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  };
  for (const auto& [since, column] : kAddedColumns) {
    if (version >= since) continue;
    for (auto at = out.find(column); at != std::string::npos; at = out.find(column, at + 1)) {
      const auto end = at + column.size();
      if ((at > 0 && name_char(out[at - 1])) || (end < out.size() && name_char(out[end])))
        continue;  // part of a longer name
      out.replace(at, column.size(), "NULL");
    }
  }
  return out;
}

}  // namespace muster::store::schema
