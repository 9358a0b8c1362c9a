// sqlite_db: see sqlite_db.hpp. The only file besides the store's own that includes sqlite3.h.
#include "common/sqlite_db.hpp"

#include <sqlite3.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "common/error.hpp"

namespace muster::store {
namespace {

// The name of a primary result code, as in the SQLite documentation.
std::string_view code_name(int primary) {
  switch (primary) {
    case SQLITE_ERROR: return "SQLITE_ERROR";
    case SQLITE_PERM: return "SQLITE_PERM";
    case SQLITE_BUSY: return "SQLITE_BUSY";
    case SQLITE_LOCKED: return "SQLITE_LOCKED";
    case SQLITE_NOMEM: return "SQLITE_NOMEM";
    case SQLITE_READONLY: return "SQLITE_READONLY";
    case SQLITE_IOERR: return "SQLITE_IOERR";
    case SQLITE_CORRUPT: return "SQLITE_CORRUPT";
    case SQLITE_FULL: return "SQLITE_FULL";
    case SQLITE_CANTOPEN: return "SQLITE_CANTOPEN";
    case SQLITE_CONSTRAINT: return "SQLITE_CONSTRAINT";
    case SQLITE_MISMATCH: return "SQLITE_MISMATCH";
    case SQLITE_NOTADB: return "SQLITE_NOTADB";
    default: return "SQLITE_OTHER";
  }
}

// Why a file in `dir` could not be opened or created, from the directory's actual state.
std::string directory_advice(const std::string& dir, const store_words& words) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return fmt::format("the directory {} does not exist; create {} first, or choose another {}",
                       dir, words.folder, words.setting);
  }
  if (access(dir.c_str(), W_OK) != 0) {
    return fmt::format(
        "the directory {} is not writable by this user ({}); the store needs to "
        "create files there: fix its permissions or choose another {}",
        dir, std::strerror(errno), words.setting);
  }
  return fmt::format("check that this user can read and write the files in {}", dir);
}

// Whether a failure is a full disk: SQLite's own code, or an I/O error on a file system with no
// space left (a full disk often surfaces so, on the WAL or shared-memory file).
bool full_disk(int primary, const std::filesystem::path& file) {
  if (primary == SQLITE_FULL) return true;
  struct statvfs fs {};
  return primary == SQLITE_IOERR && statvfs(file.parent_path().c_str(), &fs) == 0 &&
         fs.f_bavail == 0;
}

// What the user can do about a failure, or empty when the message says it all.
std::string advice(int primary, const std::filesystem::path& file, const store_words& words) {
  const std::string dir = file.parent_path().string();
  switch (primary) {
    case SQLITE_FULL:
      return fmt::format(
          "the disk holding {} is full (or the store reached its size limit); "
          "free space there or point {} at a filesystem with room",
          dir, words.setting);
    case SQLITE_READONLY:
    case SQLITE_PERM:
      if (access(dir.c_str(), W_OK) != 0) return directory_advice(dir, words);
      return fmt::format(
          "the file is read-only for this user (or its file system is); fix the "
          "permissions of {} or choose a {} this user can write",
          file.string(), words.setting);
    case SQLITE_CANTOPEN:
      return directory_advice(dir, words);
    case SQLITE_NOTADB:
      return fmt::format("{} is not an SQLite database; move it out of {}", file.string(),
                         words.folder);
    case SQLITE_CORRUPT:
      return fmt::format("the file is damaged; keep a copy for a bug report and {}",
                         words.start_over);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return fmt::format("another process held the lock past the busy timeout; {}",
                         words.one_writer);
    case SQLITE_IOERR:
      if (full_disk(primary, file)) return advice(SQLITE_FULL, file, words);
      return fmt::format("the filesystem holding {} reported an I/O error; check it (dmesg, "
                         "quota, mount state)", dir);
    default:
      return {};
  }
}

bool is_uri_unreserved(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
}

// The store_error of a failed call (sqlite_failure_message's text).
[[noreturn]] void throw_failure(const std::filesystem::path& file, std::string_view operation,
                                int result_code, std::string_view sqlite_message,
                                std::string_view constraint_advice, const store_words& words) {
  const int primary = result_code & 0xff;
  throw store_error(sqlite_failure_message(file, operation, result_code, sqlite_message,
                                           constraint_advice, words),
                    primary == SQLITE_BUSY, full_disk(primary, file));
}

}  // namespace

std::string sqlite_file_uri(const std::filesystem::path& file, std::string_view parameters) {
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(file, ec);
  if (ec) {
    throw error(errc::store, fmt::format("run store {}: cannot make the path absolute: {}; "
                                         "check that the current directory still exists",
                                         file.string(), ec.message()));
  }
  // An empty authority ("file://" then the path, which starts with '/'), so a path starting
  // with "//" cannot be taken for one; every byte but unreserved ones and '/' is %XX.
  std::string uri = "file://";
  for (char c : absolute.string()) {
    if (is_uri_unreserved(c)) {
      uri += c;
    } else {
      uri += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  if (!parameters.empty()) {
    uri += '?';
    uri += parameters;
  }
  return uri;
}

std::string sqlite_failure_message(const std::filesystem::path& file, std::string_view operation,
                                   int result_code, std::string_view sqlite_message,
                                   std::string_view constraint_advice, const store_words& words) {
  const int primary = result_code & 0xff;
  std::string text = fmt::format("{} {}: {}: {} ({})", words.name, file.string(), operation,
                                 sqlite_message, code_name(primary));
  std::string hint =
      primary == SQLITE_CONSTRAINT ? std::string(constraint_advice) : advice(primary, file, words);
  if (!hint.empty()) text += "; " + hint;
  return text;
}

// ---- sqlite_stmt ----------------------------------------------------------------------------

sqlite_stmt::sqlite_stmt(sqlite3_stmt* stmt, std::filesystem::path file, const store_words& words)
    : stmt_(stmt), file_(std::move(file)), words_(words) {}

sqlite_stmt::~sqlite_stmt() { sqlite3_finalize(stmt_); }

sqlite_stmt::sqlite_stmt(sqlite_stmt&& other) noexcept
    : stmt_(std::exchange(other.stmt_, nullptr)),
      file_(std::move(other.file_)),
      words_(other.words_) {}

sqlite_stmt& sqlite_stmt::operator=(sqlite_stmt&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    stmt_ = std::exchange(other.stmt_, nullptr);
    file_ = std::move(other.file_);
    words_ = other.words_;
  }
  return *this;
}

void sqlite_stmt::fail(int result_code, std::string_view operation,
                       std::string_view constraint_advice) {
  std::string message = sqlite3_errmsg(sqlite3_db_handle(stmt_));
  reset();
  throw_failure(file_, operation, result_code, message, constraint_advice, words_);
}

void sqlite_stmt::reset() noexcept {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

void sqlite_stmt::bind(int index, std::int64_t value) {
  if (int rc = sqlite3_bind_int64(stmt_, index, value); rc != SQLITE_OK) fail(rc, "bind");
}

void sqlite_stmt::bind(int index, double value) {
  if (int rc = sqlite3_bind_double(stmt_, index, value); rc != SQLITE_OK) fail(rc, "bind");
}

void sqlite_stmt::bind(int index, std::string_view value) {
  int rc = sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT,
                               SQLITE_UTF8);
  if (rc != SQLITE_OK) fail(rc, "bind");
}

void sqlite_stmt::bind_null(int index) {
  if (int rc = sqlite3_bind_null(stmt_, index); rc != SQLITE_OK) fail(rc, "bind");
}

void sqlite_stmt::execute(std::string_view operation, std::string_view constraint_advice) {
  int rc = sqlite3_step(stmt_);
  while (rc == SQLITE_ROW) rc = sqlite3_step(stmt_);
  if (rc != SQLITE_DONE) fail(rc, operation, constraint_advice);
  reset();
}

void sqlite_stmt::for_each_row(std::string_view operation, const std::function<void()>& on_row) {
  int rc = SQLITE_ROW;
  try {
    while ((rc = sqlite3_step(stmt_)) == SQLITE_ROW) on_row();
  } catch (...) {
    reset();
    throw;
  }
  if (rc != SQLITE_DONE) fail(rc, operation);
  reset();
}

bool sqlite_stmt::column_is_null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

std::int64_t sqlite_stmt::column_int64(int column) const {
  return sqlite3_column_int64(stmt_, column);
}

double sqlite_stmt::column_double(int column) const {
  if (column_is_null(column)) return std::numeric_limits<double>::quiet_NaN();
  return sqlite3_column_double(stmt_, column);
}

std::string sqlite_stmt::column_text(int column) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  if (!text) return {};
  return std::string(text, static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::optional<std::int64_t> sqlite_stmt::column_optional_int64(int column) const {
  if (column_is_null(column)) return std::nullopt;
  return column_int64(column);
}

// ---- sqlite_db ------------------------------------------------------------------------------

sqlite_db::sqlite_db(const std::filesystem::path& file, open_mode mode, const store_words& words)
    : file_(file), words_(words) {
  // Always a URI, even for writing: a plain name starting with "file:" would be taken for one
  // wherever SQLite was built with SQLITE_USE_URI.
  int flags = SQLITE_OPEN_EXRESCODE | SQLITE_OPEN_URI;
  std::string_view parameters;
  switch (mode) {
    case open_mode::read_write:
      flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
      parameters = "mode=rwc";
      break;
    case open_mode::read_only:
      flags |= SQLITE_OPEN_READONLY;
      parameters = "mode=ro";
      break;
    case open_mode::read_immutable:
      flags |= SQLITE_OPEN_READONLY;
      parameters = "mode=ro&immutable=1";
      break;
  }
  std::string uri = sqlite_file_uri(file, parameters);
  int rc = sqlite3_open_v2(uri.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    close();
    throw_failure(file_, "open", rc, message, {}, words_);
  }
  // SQLite quietly opens a file it may not write read-only; a writer must know at once.
  if (mode == open_mode::read_write && sqlite3_db_readonly(db_, "main") == 1) {
    close();
    throw_failure(file_, "open for writing", SQLITE_READONLY, "SQLite could open it only read-only",
                  {}, words_);
  }
}

sqlite_db::~sqlite_db() { close(); }

sqlite_db::sqlite_db(sqlite_db&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), file_(std::move(other.file_)), words_(other.words_) {}

sqlite_db& sqlite_db::operator=(sqlite_db&& other) noexcept {
  if (this != &other) {
    close();
    db_ = std::exchange(other.db_, nullptr);
    file_ = std::move(other.file_);
    words_ = other.words_;
  }
  return *this;
}

void sqlite_db::close() noexcept {
  // close_v2: statements still alive keep the connection until they are finalized.
  if (db_) sqlite3_close_v2(std::exchange(db_, nullptr));
}

void sqlite_db::fail(int result_code, std::string_view operation) const {
  throw_failure(file_, operation, result_code, sqlite3_errmsg(db_), {}, words_);
}

void sqlite_db::exec(std::string_view sql, std::string_view operation) {
  std::string text(sql);
  if (int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, nullptr); rc != SQLITE_OK) {
    fail(rc, operation);
  }
}

sqlite_stmt sqlite_db::prepare(std::string_view sql) const {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) fail(rc, fmt::format("prepare \"{}\"", sql));
  return sqlite_stmt(stmt, file_, words_);
}

std::optional<std::string> sqlite_db::query_text(std::string_view sql,
                                                 std::string_view operation) const {
  sqlite_stmt stmt = prepare(sql);
  std::optional<std::string> value;
  stmt.for_each_row(operation, [&] {
    if (!value) value = stmt.column_text(0);
  });
  return value;
}

std::int64_t sqlite_db::query_int64(std::string_view sql, std::string_view operation) const {
  sqlite_stmt stmt = prepare(sql);
  std::int64_t value = 0;
  stmt.for_each_row(operation, [&] { value = stmt.column_int64(0); });
  return value;
}

void sqlite_db::set_busy_timeout(int milliseconds) { sqlite3_busy_timeout(db_, milliseconds); }

// ---- sqlite_transaction ---------------------------------------------------------------------

sqlite_transaction::sqlite_transaction(sqlite_db& db) : db_(db) {
  db_.exec("BEGIN IMMEDIATE", "begin transaction");
}

sqlite_transaction::~sqlite_transaction() {
  if (!open_) return;
  try {
    db_.exec("ROLLBACK", "roll back transaction");
  } catch (const error&) {
    // SQLite already rolled back (a failed COMMIT on a full disk does): nothing left to undo.
  }
}

void sqlite_transaction::commit() {
  db_.exec("COMMIT", "commit transaction");
  open_ = false;
}

}  // namespace muster::store
