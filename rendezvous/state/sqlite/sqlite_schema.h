// The layout of the rendezvous state database and the checks that guard it. A database this
// build cannot read with confidence (not SQLite, corrupt, another program's, or written by a
// newer ddprun) is refused with a message naming the file and what to do: it is never
// recreated or truncated, since it may hold the only record of running jobs.
//
// Layout (see README.md): PRAGMA application_id = kApplicationId;
//   schema_version(version INTEGER NOT NULL)            exactly one row
//   jobs(job_id TEXT PRIMARY KEY, state BLOB NOT NULL, updated_ms INTEGER NOT NULL)
//   nodes(job_id TEXT, node_id TEXT, state BLOB NOT NULL, PRIMARY KEY (job_id, node_id))
//   excluded_hosts(host TEXT PRIMARY KEY, record BLOB NOT NULL)
// History: version 1 had no `updated_ms`; version 2 adds it (wall-clock ms of the last save,
// for operators inspecting the file); version 3 adds `nodes`, one row per node, so that a save
// writes the nodes that changed instead of the whole job (issue 25); version 4 (current) adds
// `excluded_hosts`, the hosts kept out after a node left unfit (issue 36).
#pragma once

#include <cstdint>

#include "common/result.h"
#include "rendezvous/state/sqlite/sqlite_database.h"

namespace ddprun::rdzv::state {

// "ddpr": marks the file as ours (`file` and `sqlite3` show it).
inline constexpr int32_t kApplicationId = 0x64647072;
// The schema this build writes; it reads every version up to this one (older ones migrate).
inline constexpr int64_t kSchemaVersion = 4;

// Brings `db` to the current schema: creates it when the file is new and empty, migrates an
// older version in one transaction, and refuses (kRefused for a newer version or a foreign
// database, kMalformed for a file that is not SQLite or is corrupt). Then sets the durability
// settings: WAL, synchronous=FULL. Blocks on disk I/O.
Status prepare_state_database(SqliteDatabase& db);

}  // namespace ddprun::rdzv::state
