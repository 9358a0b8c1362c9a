// The run store's schema: the migrations keyed by `PRAGMA user_version`, and the version checks
// writers and readers make before they touch a node file.
//
// Private to the run store (run_store.cpp, run_reader.cpp). Migrations only ever run in a
// writer; a reader checks the version and never changes a file.
#pragma once

#include <string>
#include <string_view>

#include "common/run_store.hpp"
#include "common/sqlite_db.hpp"

namespace muster::store::schema {

// The version this muster writes and reads (the last migration's).
inline constexpr int kCurrentVersion = kSchemaVersion;

// The oldest version readers read, the columns it does not have yet as NULL (sql_for_version).
inline constexpr int kOldestReadable = 2;

// The file's `PRAGMA user_version` (0 for a new or empty file).
int user_version(const sqlite_db& db);

// For writers, before they change anything (even the journal mode): throws errc::store when
// the file is from a newer muster, or holds tables but no version (not a muster store).
void check_writable(sqlite_db& db);

// Brings a file opened for writing up to kCurrentVersion, one transaction per step, so a crash
// leaves it at a whole version. Throws errc::store when the file is from a newer muster, or
// holds tables but no version (not a muster store).
void migrate(sqlite_db& db);

// For readers: true when the file is at version `readable`, false when it is empty (a node
// whose writer died before it created the schema). Throws errc::store, naming both versions,
// for a newer or older schema, and for a file that is not a muster store. Only reads: the file
// is never changed. `readable` is a parameter so tests can reach the older-schema refusal
// while no older version exists; code passes the default.
bool check_readable(const sqlite_db& db, int readable = kCurrentVersion);

// `sql` as a reader of a file at `version` runs it: each column added after that version
// (s.comm_wait_s in 3; slurm_cluster and slurm_task_job_id in 4) becomes NULL where it stands
// as a whole name; a longer name that contains one is left as it is.
std::string sql_for_version(std::string_view sql, int version);

}  // namespace muster::store::schema
