// The worker SDK's error model: every failure crosses the API as a ddp::Error.
//
// LibTorch users expect exceptions, so the SDK throws (unlike the launcher, which passes
// Status values). Each error names the rank that saw it and the operation that failed, so a
// line in a multi-rank log is enough to find the culprit: "ddp rank 1: all_reduce: <detail>".
#pragma once

#include <stdexcept>
#include <string>

namespace ddp {

class Error : public std::runtime_error {
 public:
  // rank: the global rank that raised the error, or -1 before the rank is known.
  // operation: what failed, e.g. "all_reduce", "init_process_group", "snapshot.load".
  Error(int rank, std::string operation, const std::string& detail)
      : std::runtime_error(format(rank, operation, detail)),
        rank_(rank),
        operation_(std::move(operation)) {}

  int rank() const noexcept { return rank_; }
  const std::string& operation() const noexcept { return operation_; }

 private:
  static std::string format(int rank, const std::string& operation, const std::string& detail) {
    std::string where = rank >= 0 ? "ddp rank " + std::to_string(rank) : std::string("ddp");
    return where + ": " + operation + ": " + detail;
  }

  int rank_;
  std::string operation_;
};

}  // namespace ddp
