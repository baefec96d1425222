// The wire format of torch's file-based timer (torch.distributed.elastic.timer.FileTimerClient),
// as a pure, bounded codec: no I/O.
//
// Protocol (torch 1.13 and 2.x send the same bytes): each request is one JSON object on one
// line, written to a FIFO in a single write() of at most PIPE_BUF (4096) bytes including the
// '\n' (the client refuses longer ones), so requests of concurrent workers never interleave:
//
//   {"version": 1, "pid": 4242, "scope_id": "train.py#17", "expiration_time": 1700000000.25,
//    "signal": 9}
//
//   pid              the worker's own pid (os.getpid()); a positive integer
//   scope_id         names the scope within the worker; (pid, scope_id) is the timer's key
//   expiration_time  wall-clock time (seconds since the epoch, time.time() + after) at which
//                    the scope expires; a negative value (the client sends -1) releases the
//                    scope instead
//   signal           what to kill the worker with when the scope expires; <= 0: do not kill
//   version          1 in every torch release so far; torch's server ignores it, and so do we
//
// Unknown fields are ignored (as torch's server does).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace ddprun::agent {

// One decoded request.
struct FileTimerRequest {
  pid_t pid = -1;
  std::string scope_id;
  double expiration_time = -1;  // seconds since the epoch; < 0: release
  int signal = 0;               // <= 0: expire without killing

  bool is_release() const { return expiration_time < 0; }
};

// PIPE_BUF on Linux: the client's own limit for one request, '\n' included.
inline constexpr std::size_t kMaxFileTimerRequestBytes = 4096;

// Decodes one line (without its '\n'). Errors are kMalformed and say what is wrong: too long,
// not JSON, not an object, a missing field or one of the wrong type or range.
Result<FileTimerRequest> parse_file_timer_request(std::string_view line);

// Cuts the FIFO's byte stream into lines of at most `max_line` bytes (the '\n' not counted).
// A longer line yields one kMalformed error and is skipped up to its '\n', so that one bad
// writer cannot make the buffer grow or swallow the requests that follow. Not thread-safe.
class FileTimerLineSplitter {
 public:
  explicit FileTimerLineSplitter(std::size_t max_line = kMaxFileTimerRequestBytes - 1)
      : max_line_(max_line) {}

  // Appends `bytes`; returns what they complete, in order: a line, or an error for one that
  // was too long. Empty lines are skipped.
  std::vector<Result<std::string>> feed(std::string_view bytes);
  // Bytes of an unterminated line held back.
  std::size_t pending() const { return pending_.size(); }

 private:
  std::size_t max_line_;
  std::string pending_;
  bool discarding_ = false;  // inside an over-long line: drop bytes up to the next '\n'
};

}  // namespace ddprun::agent
