// What travels on a TCPStore connection, independent of how it is encoded (protocol.md).
//
// c10d's TCPStore clients speak two dialects that number their query types differently:
// torch 1.x-2.0 ("legacy": no handshake, SET = 0, WATCH_KEY = 7) and torch 2.x with the
// VALIDATE handshake ("validated": VALIDATE = 0, SET = 1, no WATCH_KEY, PING and queues).
// `Op` names a query whatever its dialect; the codec maps wire bytes to it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ddprun::store {

enum class Dialect : uint8_t {
  kUnknown,    // nothing decided yet: the connection has not sent enough bytes
  kLegacy,     // torch 1.x-2.0: the first byte is already a query
  kValidated,  // torch 2.x: the first query is VALIDATE with kValidationMagic
};

// torch 2.x's VALIDATE argument (c10d::detail::validationMagicNumber).
inline constexpr uint32_t kValidationMagic = 0x3C85F7CE;

// Every query either dialect can send. The order is ours, not the wire's.
enum class Op : uint8_t {
  kValidate,    // validated only: u32 magic; no reply
  kSet,         // key, value; no reply
  kCompareSet,  // key, expected, desired; reply: the value now stored (see engine.h)
  kGet,         // key; reply: value
  kAdd,         // key, i64 delta; reply: i64 sum
  kCheck,       // keys; reply: u8 READY / NOT_READY
  kWait,        // keys; reply: u8 STOP_WAITING, once every key exists
  kNumKeys,     // reply: i64
  kWatchKey,    // legacy only: key; reply: u8 KEY_CALLBACK_REGISTERED, then change events
  kDeleteKey,   // key; reply: i64 number deleted (0 or 1)
  kAppend,      // key, value; no reply
  kMultiGet,    // keys; reply: one value per key
  kMultiSet,    // keys and values; no reply
  kCancelWait,  // reply: u8 WAIT_CANCELED
  kPing,        // validated only: u32 nonce; reply: the nonce
  kQueuePush,   // validated only: key, value; no reply
  kQueuePop,    // validated only: key; reply: i64 length before the pop, then the value if > 0
  kQueueLen,    // validated only: key; reply: i64
  kListKeys,    // validated only: reply: i64 count, then that many keys
  kBarrier,     // validated only: key, i64 world size; reply: u8 STOP_WAITING once the key's
                // counter (incremented by this query) reaches the world size
};
inline constexpr size_t kOpCount = static_cast<size_t>(Op::kBarrier) + 1;

// The query's name for logs and statistics ("set", "compare_set", ...).
const char* op_name(Op op);

// One decoded query. Which fields are used depends on `op` (see Op above).
struct Request {
  Op op = Op::kSet;
  std::vector<std::string> keys;    // one key, or the list of check/wait/multi_get/multi_set
  std::vector<std::string> values;  // set/append/queue_push: 1; compare_set: expected, desired;
                                    // multi_set: one per key
  int64_t delta = 0;                // add: the delta; barrier: the world size
  uint32_t number = 0;              // validate: the magic; ping: the nonce
};

// Replies to WAIT and CANCEL_WAIT (c10d's WaitResponseType).
enum class WaitReply : uint8_t { kStopWaiting = 0, kWaitCanceled = 1 };

// Replies to CHECK (c10d's CheckResponseType).
enum class CheckReply : uint8_t { kReady = 0, kNotReady = 1 };

// What a watch event says (c10d 1.x-2.0's WatchResponseType); kRegistered answers WATCH_KEY.
enum class WatchKind : uint8_t {
  kUpdated = 0,
  kCreated = 1,
  kDeleted = 2,
  kRegistered = 3,
  kAppended = 4,
};

// A change of a watched key, pushed on the connection that asked WATCH_KEY.
struct WatchEvent {
  WatchKind kind = WatchKind::kUpdated;
  std::string key;
  std::string old_value;  // empty for kCreated and kAppended
  std::string new_value;  // empty for kDeleted; the appended bytes for kAppended
};

}  // namespace ddprun::store
