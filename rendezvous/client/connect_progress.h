// What a node says while it waits for its rendezvous server: a line when the first attempt
// fails, then lines at a growing interval (5 s, 10 s, 20 s, 40 s, then every 60 s), each with
// the endpoint, how long it has waited, the attempts, the last error and when it gives up.
// Never a line per attempt (a thousand agents retrying would flood their logs), never silence
// for minutes (issue 22: an unreachable endpoint printed nothing for 100 s).
//
// Pure: connect_with_backoff (connector.h) feeds it attempts and logs what it returns.
#pragma once

#include <optional>
#include <string>

#include "common/clock.h"

namespace ddprun::rdzv {

class ConnectProgress {
 public:
  // `endpoint` as the messages name it; `started`: the first attempt; `deadline`: when the
  // connector gives up.
  ConnectProgress(std::string endpoint, SteadyTime started, SteadyTime deadline);

  // An attempt failed at `now` with `error`. Returns the line to log, when one is due.
  std::optional<std::string> failed(SteadyTime now, const std::string& error);

 private:
  std::string endpoint_;
  SteadyTime started_;
  SteadyTime deadline_;
  int attempts_ = 0;
  Millis next_report_{0};  // since started_; the first failure always reports
  Millis interval_{5'000};
};

}  // namespace ddprun::rdzv
