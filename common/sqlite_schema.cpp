// Versioned SQLite schemas: see sqlite_schema.hpp.
#include "common/sqlite_schema.hpp"

#include "common/error.hpp"
#include "muster/version.hpp"

namespace muster::store {
namespace {

bool has_tables(const sqlite_db& db) {
  return db.query_int64("SELECT count(*) FROM sqlite_schema WHERE type = 'table'",
                        "look for tables") > 0;
}

[[noreturn]] void throw_newer(const sqlite_db& db, const sqlite_schema& s, int version, int known) {
  MUSTER_THROW(errc::store,
               "{} {}: schema version {} was written by a newer muster; this muster ({}) "
               "knows versions up to {}; use that newer muster (or a later one) with this file",
               s.store, db.file().string(), version, kVersion, known);
}

[[noreturn]] void throw_foreign(const sqlite_db& db, const sqlite_schema& s) {
  MUSTER_THROW(errc::store,
               "{} {}: the file holds tables but no muster schema version (user_version 0); "
               "it is not a muster {}: {}",
               s.store, db.file().string(), s.store, s.foreign_fix);
}

}  // namespace

int user_version(const sqlite_db& db) {
  return static_cast<int>(db.query_int64("PRAGMA user_version", "read schema version"));
}

void check_writable(sqlite_db& db, const sqlite_schema& schema) {
  int version = user_version(db);
  if (version == 0 && has_tables(db)) {
    // Tables without a version may be another writer's schema caught half-way (several srun
    // tasks open one node file at once): read both again under the write lock, which waits
    // until no other writer is inside its migration.
    sqlite_transaction lock(db);
    version = user_version(db);
    if (version == 0 && has_tables(db)) throw_foreign(db, schema);
  }
  if (version > schema.current()) throw_newer(db, schema, version, schema.current());
}

void migrate(sqlite_db& db, const sqlite_schema& schema) {
  check_writable(db, schema);
  int version = user_version(db);
  for (const sqlite_migration& step : schema.migrations) {
    if (step.to_version <= version) continue;
    sqlite_transaction transaction(db);
    // Read again under the write lock: the version decides what runs.
    version = user_version(db);
    if (step.to_version <= version) continue;
    db.exec(step.sql, fmt::format("migrate schema to version {}", step.to_version));
    db.exec(fmt::format("PRAGMA user_version = {}", step.to_version), "set schema version");
    transaction.commit();
    version = step.to_version;
  }
}

bool check_readable(const sqlite_db& db, const sqlite_schema& schema, int readable) {
  int version = user_version(db);
  if (version == readable) return true;
  if (version > readable) throw_newer(db, schema, version, readable);
  if (version == 0) {
    if (has_tables(db)) throw_foreign(db, schema);
    return false;
  }
  MUSTER_THROW(errc::store,
               "{} {}: schema version {} is older than version {} that this muster ({}) "
               "reads, and readers never migrate a file; read it with the muster that wrote it, "
               "or open it once for writing with this one (which migrates it)",
               schema.store, db.file().string(), version, readable, kVersion);
}

}  // namespace muster::store
