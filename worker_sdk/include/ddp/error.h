// The worker SDK's error model: every failure crosses the API as a ddp::Error.
//
// LibTorch users expect exceptions, so the SDK throws (unlike the launcher, which passes
// Status values). Each error names the rank that saw it and the operation that failed, so a
// line in a multi-rank log is enough to find the culprit: "ddp rank 1: all_reduce: <detail>".
// It also remembers where it was raised (a native backtrace), which ddp::record and the
// failure handlers put into the launcher's error file (see ddp/failure.h).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ddp/export.h"

namespace ddp {

enum class ErrorKind {
  kFailed,    // this rank's operation failed
  kPeerLost,  // a peer closed or reset its connection: usually another rank's failure, seen
              // from here (ddp::record then lets the launcher stop this rank first)
};

class DDP_API Error : public std::runtime_error {
 public:
  // rank: the global rank that raised the error, or -1 before the rank is known.
  // operation: what failed, e.g. "all_reduce", "init_process_group", "snapshot.load".
  Error(int rank, std::string operation, const std::string& detail,
        ErrorKind kind = ErrorKind::kFailed);

  int rank() const noexcept { return rank_; }
  const std::string& operation() const noexcept { return operation_; }
  ErrorKind kind() const noexcept { return kind_; }
  // Where the error was constructed: one line per frame, innermost first,
  // "  #<n> 0x<address> <function>". Symbolised on demand (may take milliseconds).
  std::string backtrace() const;

 private:
  int rank_;
  std::string operation_;
  ErrorKind kind_;
  // Return addresses captured at construction; shared so that copies stay noexcept.
  std::shared_ptr<const std::vector<void*>> frames_;
};

}  // namespace ddp
