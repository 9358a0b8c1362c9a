// Versioned SQLite schemas: a store's migrations keyed by `PRAGMA user_version`, and the version
// checks its writers and readers make before they touch a file. Shared by the run store
// (run_store_schema.cpp) and musterd's node store (daemon/node_store.cpp); each keeps its own
// migrations and names itself in the messages.
//
// Migrations only ever run in a writer; a reader checks the version and never changes a file.
#pragma once

#include <span>
#include <string_view>

#include "common/sqlite_db.hpp"

namespace muster::store {

struct sqlite_migration {
  int to_version;
  std::string_view sql;
};

struct sqlite_schema {
  std::string_view store;  // how messages name the file's kind: "run store", "node store"
  std::span<const sqlite_migration> migrations;  // in order; the last one's version is current
  std::string_view foreign_fix;                  // what to do with a file that is not this store
  int current() const { return migrations.back().to_version; }
};

// The file's `PRAGMA user_version` (0 for a new or empty file).
int user_version(const sqlite_db& db);

// For writers, before they change anything (even the journal mode): throws errc::store when
// the file is from a newer muster, or holds tables but no version (not this kind of store).
void check_writable(sqlite_db& db, const sqlite_schema& schema);

// Brings a file opened for writing up to schema.current(), one transaction per step, so a crash
// leaves it at a whole version. Throws as check_writable.
void migrate(sqlite_db& db, const sqlite_schema& schema);

// For readers: true when the file is at version `readable`, false when it is empty (a writer
// died before it created the schema). Throws errc::store, naming both versions, for a newer or
// older schema, and for a file that is not this store. Only reads.
bool check_readable(const sqlite_db& db, const sqlite_schema& schema, int readable);

}  // namespace muster::store
