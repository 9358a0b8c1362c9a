// sqlite_db: a small RAII wrapper over an sqlite3 connection and its prepared statements, and
// the one place that turns SQLite result codes into muster::error (errc::store) messages.
//
// It is the run store's private plumbing (run_store.cpp, run_reader.cpp, run_store_schema.cpp;
// store_error is what their callers may catch)
// and knows nothing of runs, ranks or steps. It is not a general database layer, and it keeps
// sqlite3.h out of every header: the handles are only forward-declared here.
// Not thread-safe: a connection and its statements are used by one thread at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace muster::store {

// How a store's messages name it and the fixes it can suggest: the run store's by default, the
// node store's (musterd) with kNodeStoreWords.
struct store_words {
  std::string_view name = "run store";
  std::string_view setting = "launch.runs_dir";   // where it lives, as a key to change
  std::string_view folder = "the run directory";  // that place, in words
  std::string_view one_writer = "only one launcher per node may write a node file";
  std::string_view start_over = "start a new run directory";  // after a damaged file
};
inline constexpr store_words kRunStoreWords{};
inline constexpr store_words kNodeStoreWords{
    "node store", "daemon.state_dir (musterd --state-dir)", "the state directory",
    "only one musterd may use a state directory, and nothing else may hold its lock",
    "move it out of the state directory and restart musterd, which makes a new one"};

// A failed SQLite call (errc::store), with what kind of failure it was for callers that act
// on it: a lock held past the busy timeout (retry), a full disk (keep the room left for what
// matters).
class store_error : public error {
 public:
  store_error(std::string message, bool busy, bool disk_full)
      : error(errc::store, std::move(message)), busy_(busy), disk_full_(disk_full) {}
  bool busy() const noexcept { return busy_; }
  // SQLITE_FULL, or an I/O error on a file system with no space left
  bool disk_full() const noexcept { return disk_full_; }

 private:
  bool busy_ = false;
  bool disk_full_ = false;
};

// The message of a failed SQLite call: "run store <file>: <operation>: <sqlite message>
// (<CODE>); <what to do>". Full disks, read-only files, missing directories, foreign files and
// lock timeouts each get their own advice; a failed constraint gets `constraint_advice`, which
// only the caller can give (it knows what the constraint means). Exposed for tests; use
// sqlite_db::fail in code.
std::string sqlite_failure_message(const std::filesystem::path& file, std::string_view operation,
                                   int result_code, std::string_view sqlite_message,
                                   std::string_view constraint_advice = {},
                                   const store_words& words = kRunStoreWords);

// `file` as an SQLite URI: "file://" + the absolute path (relative ones are taken from the
// current directory) with every byte other than [A-Za-z0-9-._~/] written %XX, then
// "?<parameters>" unless they are empty. So '?', '#', '%', spaces and a leading "//" (which
// after "file:" would read as a host name) all name the file they name in the file system.
// Throws errc::store when the current directory is needed and gone. Exposed for tests.
std::string sqlite_file_uri(const std::filesystem::path& file, std::string_view parameters);

// A prepared statement. Parameters are 1-based as in SQLite, columns 0-based. After the last
// row (or an error) the statement is reset and its bindings cleared, ready for the next use.
class sqlite_stmt {
 public:
  sqlite_stmt() = default;
  sqlite_stmt(sqlite3_stmt* stmt, std::filesystem::path file,
              const store_words& words = kRunStoreWords);
  ~sqlite_stmt();
  sqlite_stmt(sqlite_stmt&& other) noexcept;
  sqlite_stmt& operator=(sqlite_stmt&& other) noexcept;
  sqlite_stmt(const sqlite_stmt&) = delete;
  sqlite_stmt& operator=(const sqlite_stmt&) = delete;

  void bind(int index, std::int64_t value);
  void bind(int index, int value) { bind(index, std::int64_t{value}); }
  void bind(int index, double value);  // NaN is stored as NULL (SQLite has no NaN)
  void bind(int index, std::string_view value);
  void bind_null(int index);
  template <class T>
  void bind(int index, const std::optional<T>& value) {
    if (value) bind(index, *value); else bind_null(index);
  }

  // Runs a statement that returns no rows (INSERT, UPDATE, ...). Throws errc::store; when a
  // constraint failed (SQLITE_CONSTRAINT), the message ends with `constraint_advice`.
  void execute(std::string_view operation, std::string_view constraint_advice = {});
  // Runs a query and calls on_row once per row, in order; columns are read through the
  // column_* members during the call. Resets the statement even when on_row throws.
  void for_each_row(std::string_view operation, const std::function<void()>& on_row);

  bool column_is_null(int column) const;
  std::int64_t column_int64(int column) const;
  double column_double(int column) const;  // NULL reads as NaN
  std::string column_text(int column) const;
  std::optional<std::int64_t> column_optional_int64(int column) const;

 private:
  [[noreturn]] void fail(int result_code, std::string_view operation,
                         std::string_view constraint_advice = {});
  void reset() noexcept;

  sqlite3_stmt* stmt_ = nullptr;
  std::filesystem::path file_;
  store_words words_;
};

// How a connection opens its file.
enum class open_mode {
  read_write,      // create the file when missing; refuse a file this user cannot write
  read_only,       // mode=ro: shares the WAL and its index with a live (or dead) writer
  read_immutable,  // mode=ro&immutable=1: no locks, creates no -wal/-shm; the file must not change
};

// One connection to one database file. Closing never throws.
class sqlite_db {
 public:
  // Opens `file`. Throws errc::store naming the file when SQLite cannot open it, or when
  // read_write finds the file read-only for this user.
  sqlite_db(const std::filesystem::path& file, open_mode mode,
            const store_words& words = kRunStoreWords);
  ~sqlite_db();
  sqlite_db(sqlite_db&& other) noexcept;
  sqlite_db& operator=(sqlite_db&& other) noexcept;
  sqlite_db(const sqlite_db&) = delete;
  sqlite_db& operator=(const sqlite_db&) = delete;

  // Runs one or more statements that return no rows. Throws errc::store.
  void exec(std::string_view sql, std::string_view operation);
  // Prepares one statement. Throws errc::store.
  sqlite_stmt prepare(std::string_view sql) const;
  // The first column of the first row of a query (a PRAGMA, a COUNT), or nullopt with no row.
  std::optional<std::string> query_text(std::string_view sql, std::string_view operation) const;
  std::int64_t query_int64(std::string_view sql, std::string_view operation) const;
  // Sets how long a call waits for another connection's lock before failing with SQLITE_BUSY.
  void set_busy_timeout(int milliseconds);

  // Throws errc::store for a failed call on this connection, with sqlite3_errmsg.
  [[noreturn]] void fail(int result_code, std::string_view operation) const;
  const std::filesystem::path& file() const { return file_; }

 private:
  void close() noexcept;

  sqlite3* db_ = nullptr;
  std::filesystem::path file_;
  store_words words_;
};

// BEGIN IMMEDIATE on construction (takes the write lock at once, so a busy lock shows up here
// and not half-way through); COMMIT in commit(); ROLLBACK when destroyed without a commit.
class sqlite_transaction {
 public:
  explicit sqlite_transaction(sqlite_db& db);
  ~sqlite_transaction();
  sqlite_transaction(const sqlite_transaction&) = delete;
  sqlite_transaction& operator=(const sqlite_transaction&) = delete;

  void commit();

 private:
  sqlite_db& db_;
  bool open_ = true;
};

}  // namespace muster::store
