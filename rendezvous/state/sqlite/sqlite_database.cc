#include "rendezvous/state/sqlite/sqlite_database.h"

#include <utility>

#include <fmt/format.h>
#include <sqlite3.h>

namespace ddprun::rdzv::state {
namespace {

// "database disk image is malformed (SQLITE_CORRUPT)": SQLite's own words plus its code, so
// that an operator can look the code up.
std::string describe_code(sqlite3* db, int code) {
  const char* message = db ? sqlite3_errmsg(db) : sqlite3_errstr(code);
  return fmt::format("{} (sqlite code {})", message, code);
}

ErrorKind kind_of(int code) {
  switch (code & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return ErrorKind::kMalformed;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL:
      return ErrorKind::kUnavailable;
    default:
      return ErrorKind::kFailed;
  }
}

}  // namespace

SqliteStatement::SqliteStatement(sqlite3_stmt* stmt, std::string path)
    : stmt_(stmt), path_(std::move(path)) {}
SqliteStatement::SqliteStatement(SqliteStatement&& other) noexcept
    : stmt_(std::exchange(other.stmt_, nullptr)), path_(std::move(other.path_)) {}
SqliteStatement& SqliteStatement::operator=(SqliteStatement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    stmt_ = std::exchange(other.stmt_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}
SqliteStatement::~SqliteStatement() { sqlite3_finalize(stmt_); }

Status SqliteStatement::bind_text(int index, std::string_view text) {
  const int rc =
      sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  if (rc == SQLITE_OK) return Status();
  return Status::error(fmt::format("{}: binding parameter {}: {}", path_, index,
                                   describe_code(sqlite3_db_handle(stmt_), rc)));
}

Status SqliteStatement::bind_blob(int index, std::string_view bytes) {
  const int rc = sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT);
  if (rc == SQLITE_OK) return Status();
  return Status::error(fmt::format("{}: binding parameter {}: {}", path_, index,
                                   describe_code(sqlite3_db_handle(stmt_), rc)));
}

Status SqliteStatement::bind_int64(int index, int64_t value) {
  const int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc == SQLITE_OK) return Status();
  return Status::error(fmt::format("{}: binding parameter {}: {}", path_, index,
                                   describe_code(sqlite3_db_handle(stmt_), rc)));
}

Result<bool> SqliteStatement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return Status::error(kind_of(rc), fmt::format("{}: {}: {}", path_, sqlite3_sql(stmt_),
                                                describe_code(sqlite3_db_handle(stmt_), rc)));
}

std::string SqliteStatement::column_bytes(int index) const {
  const void* data = sqlite3_column_blob(stmt_, index);
  const int size = sqlite3_column_bytes(stmt_, index);
  return data ? std::string(static_cast<const char*>(data), static_cast<size_t>(size)) : "";
}

int64_t SqliteStatement::column_int64(int index) const {
  return sqlite3_column_int64(stmt_, index);
}

void SqliteStatement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

Result<SqliteDatabase> SqliteDatabase::open(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) {
    Status s = Status::error(kind_of(rc), fmt::format("cannot open the state database {}: {}", path,
                                                      describe_code(db, rc)));
    sqlite3_close(db);
    return s;
  }
  sqlite3_extended_result_codes(db, 1);
  return SqliteDatabase(db, path);
}

SqliteDatabase::SqliteDatabase(SqliteDatabase&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}
SqliteDatabase& SqliteDatabase::operator=(SqliteDatabase&& other) noexcept {
  if (this != &other) {
    sqlite3_close(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}
SqliteDatabase::~SqliteDatabase() { sqlite3_close(db_); }

Status SqliteDatabase::error(const std::string& what, int code) const {
  return Status::error(kind_of(code),
                       fmt::format("{}: {}: {}", path_, what, describe_code(db_, code)));
}

Status SqliteDatabase::exec(const std::string& sql) {
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? Status() : error(sql, rc);
}

Result<SqliteStatement> SqliteDatabase::prepare(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return error(sql, rc);
  return SqliteStatement(stmt, path_);
}

Result<std::optional<std::string>> SqliteDatabase::query_text(const std::string& sql) {
  auto stmt = prepare(sql);
  if (!stmt) return stmt.status();
  auto row = stmt->step();
  if (!row) return row.status();
  if (!*row) return std::optional<std::string>();
  return std::optional<std::string>(stmt->column_bytes(0));
}

Result<int64_t> SqliteDatabase::query_int(const std::string& sql) {
  auto stmt = prepare(sql);
  if (!stmt) return stmt.status();
  auto row = stmt->step();
  if (!row) return row.status();
  if (!*row) return Status::not_found(fmt::format("{}: {}: no row", path_, sql));
  return stmt->column_int64(0);
}

}  // namespace ddprun::rdzv::state
