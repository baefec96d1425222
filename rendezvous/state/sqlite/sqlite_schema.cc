#include "rendezvous/state/sqlite/sqlite_schema.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace ddprun::rdzv::state {
namespace {

// Appended to every refusal: the operator's choices, none of which loses data silently.
constexpr const char* kWhatToDo =
    "Nothing was changed. Move the file away (or restore a backup) to start with empty state, "
    "or point --state-dir at another directory";

Status refuse(ErrorKind kind, const SqliteDatabase& db, const std::string& why) {
  return Status::error(kind, fmt::format("refusing the rendezvous state database {}: {}. {}.",
                                         db.path(), why, kWhatToDo));
}

// WITHOUT ROWID: the rows live in the primary key's b-tree, so a job's nodes are adjacent and
// an upsert touches one tree.
constexpr const char* kCreateNodes =
    "CREATE TABLE nodes (job_id TEXT NOT NULL, node_id TEXT NOT NULL, state BLOB NOT NULL,"
    " PRIMARY KEY (job_id, node_id)) WITHOUT ROWID;";

constexpr const char* kCreateExcludedHosts =
    "CREATE TABLE excluded_hosts (host TEXT PRIMARY KEY NOT NULL, record BLOB NOT NULL);";

Status create_schema(SqliteDatabase& db) {
  return db.exec(
      fmt::format("BEGIN IMMEDIATE;"
                  "PRAGMA application_id = {};"
                  "CREATE TABLE schema_version (version INTEGER NOT NULL);"
                  "INSERT INTO schema_version (version) VALUES ({});"
                  "CREATE TABLE jobs (job_id TEXT PRIMARY KEY NOT NULL, state BLOB NOT NULL,"
                  " updated_ms INTEGER NOT NULL DEFAULT 0);"
                  "{}{}"
                  "COMMIT;",
                  kApplicationId, kSchemaVersion, kCreateNodes, kCreateExcludedHosts));
}

// Step from `from` to `from + 1`. Each step is plain SQL run inside the migration's transaction.
const char* migration_step(int64_t from) {
  switch (from) {
    case 1:
      return "ALTER TABLE jobs ADD COLUMN updated_ms INTEGER NOT NULL DEFAULT 0;";
    case 2:
      return kCreateNodes;  // version 2 jobs keep their nodes inside their own record
    case 3:
      return kCreateExcludedHosts;
    default:
      return nullptr;
  }
}

Status migrate(SqliteDatabase& db, int64_t from) {
  std::string sql = "BEGIN IMMEDIATE;";
  for (int64_t v = from; v < kSchemaVersion; ++v) {
    const char* step = migration_step(v);
    if (!step) {
      return refuse(ErrorKind::kRefused, db,
                    fmt::format("schema version {} has no migration to version {}", v, v + 1));
    }
    sql += step;
  }
  sql += fmt::format("UPDATE schema_version SET version = {}; COMMIT;", kSchemaVersion);
  Status s = db.exec(sql);
  if (!s) {
    // The transaction left nothing half-done; a failed rollback is said, not hidden.
    if (Status r = db.exec("ROLLBACK;"); !r) spdlog::warn("rendezvous state: {}", r.message());
    return s.with_context(fmt::format("migrating schema version {} to {}", from, kSchemaVersion));
  }
  return Status();
}

// quick_check: the structural checks of integrity_check without the slow index cross-checks;
// O(size of the database), a few milliseconds for rendezvous state.
Status check_structure(SqliteDatabase& db) {
  auto stmt = db.prepare("PRAGMA quick_check(5);");
  if (!stmt) return refuse(ErrorKind::kMalformed, db, "it is corrupt: " + stmt.error_message());
  std::vector<std::string> problems;
  for (;;) {
    auto row = stmt->step();
    if (!row) return refuse(ErrorKind::kMalformed, db, "it is corrupt: " + row.error_message());
    if (!*row) break;
    if (std::string line = stmt->column_bytes(0); line != "ok") problems.push_back(line);
  }
  if (problems.empty()) return Status();
  return refuse(ErrorKind::kMalformed, db,
                fmt::format("it is corrupt (quick_check: {})", fmt::join(problems, "; ")));
}

Status check_version(SqliteDatabase& db) {
  auto version = db.query_int("SELECT version FROM schema_version;");
  if (!version) {
    return refuse(ErrorKind::kMalformed, db,
                  "its schema_version table is missing or empty: " + version.error_message());
  }
  if (*version > kSchemaVersion) {
    return refuse(ErrorKind::kRefused, db,
                  fmt::format("it was written by a newer ddp-rendezvous (schema version {}; this "
                              "build reads versions up to {}); run the newer ddp-rendezvous",
                              *version, kSchemaVersion));
  }
  if (*version < 1) {
    return refuse(ErrorKind::kMalformed, db, fmt::format("bad schema version {}", *version));
  }
  return *version < kSchemaVersion ? migrate(db, *version) : Status();
}

}  // namespace

Status prepare_state_database(SqliteDatabase& db) {
  // The first read of the header: a file that is not SQLite fails here (SQLITE_NOTADB).
  auto app_id = db.query_int("PRAGMA application_id;");
  if (!app_id) {
    return refuse(ErrorKind::kMalformed, db,
                  "it is not a SQLite database or it is damaged (" + app_id.error_message() + ")");
  }
  if (Status s = check_structure(db); !s) return s;
  auto tables = db.query_int("SELECT count(*) FROM sqlite_master;");
  if (!tables) return refuse(ErrorKind::kMalformed, db, tables.error_message());
  if (*app_id == 0 && *tables == 0) {
    if (Status s = create_schema(db); !s) return s.with_context("creating the state database");
  } else if (*app_id != kApplicationId) {
    return refuse(ErrorKind::kRefused, db,
                  fmt::format("it belongs to another program (application_id {:#x}, ddprun's is "
                              "{:#x})",
                              static_cast<uint32_t>(*app_id), kApplicationId));
  } else if (Status s = check_version(db); !s) {
    return s;
  }
  // WAL: a commit appends to the log and fsyncs it once (synchronous=FULL), so a commit that
  // returned survives a crash of the process or of the machine; readers never block the writer.
  auto mode = db.query_text("PRAGMA journal_mode = WAL;");
  if (!mode || !*mode || **mode != "wal") {
    return Status::error(fmt::format("{}: could not switch to WAL journaling ({})", db.path(),
                                     mode ? (*mode ? **mode : "no answer") : mode.error_message()));
  }
  return db.exec("PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000;");
}

}  // namespace ddprun::rdzv::state
