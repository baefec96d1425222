// A thin RAII layer over the SQLite C API: one connection, prepared statements, and errors as
// Status values that name the database file and what failed. Nothing here knows the schema.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace ddprun::rdzv::state {

// One prepared statement. Move-only; finalized on destruction. Not thread-safe: use it under
// the same lock as its connection.
class SqliteStatement {
 public:
  SqliteStatement(sqlite3_stmt* stmt, std::string path);
  SqliteStatement(SqliteStatement&&) noexcept;
  SqliteStatement& operator=(SqliteStatement&&) noexcept;
  ~SqliteStatement();

  // Bind to the 1-based parameter `index`. Blobs and texts are copied (SQLITE_TRANSIENT).
  Status bind_text(int index, std::string_view text);
  Status bind_blob(int index, std::string_view bytes);
  Status bind_int64(int index, int64_t value);
  // Runs one step: true when a row is available, false when done.
  Result<bool> step();
  // Columns of the current row (0-based). A NULL reads as "" / 0.
  std::string column_bytes(int index) const;
  int64_t column_int64(int index) const;
  // Ready for new bindings and steps.
  void reset();

 private:
  sqlite3_stmt* stmt_;
  std::string path_;  // for error messages
};

// One connection to one database file. Move-only; closed on destruction.
// Thread-safety: none; the owner serialises every use (SqliteStateStore holds a mutex).
class SqliteDatabase {
 public:
  // Opens (creating if absent) the file read-write. SQLite reads lazily: a file that is not a
  // database opens fine and fails at the first statement.
  static Result<SqliteDatabase> open(const std::string& path);
  SqliteDatabase(SqliteDatabase&&) noexcept;
  SqliteDatabase& operator=(SqliteDatabase&&) noexcept;
  ~SqliteDatabase();

  // Runs one or more statements that return nothing useful.
  Status exec(const std::string& sql);
  Result<SqliteStatement> prepare(const std::string& sql);
  // The first column of the first row (a PRAGMA or a count); nullopt when there is no row.
  Result<std::optional<std::string>> query_text(const std::string& sql);
  Result<int64_t> query_int(const std::string& sql);

  const std::string& path() const { return path_; }

 private:
  SqliteDatabase(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  Status error(const std::string& what, int code) const;

  sqlite3* db_ = nullptr;
  std::string path_;
};

}  // namespace ddprun::rdzv::state
