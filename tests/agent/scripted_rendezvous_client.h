// A RendezvousClient that records every call and answers only when the test says so: the
// coordinator is driven through exact sequences of replies and pushes, with no sockets.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/client/client.h"

namespace ddprun::agent::testing {

class ScriptedRendezvousClient final : public rdzv::RendezvousClient {
 public:
  struct FailureReportCall {
    std::string failure_report;
    int32_t exit_code = 0;
    std::function<void(Status)> done;
    std::string not_restartable;
  };

  void set_event_handler(std::function<void(const rdzv::RendezvousEvent&)> h) override {
    handler = std::move(h);
  }
  void connect(std::function<void(Status)> done) override {
    ++connects;
    pending_connect = std::move(done);
  }
  void join(rdzv::JoinRequest request,
            std::function<void(Result<rdzv::RoundAssignment>)> done) override {
    joins.push_back(std::move(request));
    pending_join = std::move(done);
  }
  void report_worker_failure(std::string failure_report, int32_t exit_code,
                             std::function<void(Status)> done,
                             std::string not_restartable) override {
    failure_reports.push_back(
        {std::move(failure_report), exit_code, std::move(done), std::move(not_restartable)});
  }
  void report_success(std::function<void(Status)> done) override {
    ++success_reports;
    pending_success = std::move(done);
  }
  void share_progress(std::vector<rdzv::RankProgressEntry> ranks,
                      uint32_t straggler_threshold_milli,
                      std::function<void(Result<rdzv::StragglerFinding>)> done) override {
    shared_progress.push_back(std::move(ranks));
    shared_threshold = straggler_threshold_milli;
    pending_stragglers = std::move(done);
  }
  void job_progress(std::function<void(Result<std::vector<rdzv::NodeProgress>>)> done) override {
    pending_progress = std::move(done);
  }
  void close(std::function<void()> done) override {
    closed = true;
    if (done) done();
  }
  void close_excluded(std::string reason, std::function<void()> done) override {
    exclude_reason = std::move(reason);
    close(std::move(done));
  }
  bool connected() const override { return connects > 0; }
  void move_to(const rdzv::ServerAddress& server) override { moved_to.push_back(server); }
  bool lost_in_good_standing(Millis) const override { return good_standing; }

  // Pushes an event as the server would.
  void push(const rdzv::RendezvousEvent& event) {
    if (handler) handler(event);
  }

  std::function<void(const rdzv::RendezvousEvent&)> handler;
  int connects = 0;
  std::string exclude_reason;  // what close_excluded() said
  std::function<void(Status)> pending_connect;
  std::vector<rdzv::JoinRequest> joins;
  std::function<void(Result<rdzv::RoundAssignment>)> pending_join;
  std::vector<FailureReportCall> failure_reports;
  int success_reports = 0;
  std::function<void(Status)> pending_success;
  bool closed = false;
  std::vector<rdzv::ServerAddress> moved_to;
  bool good_standing = true;
  std::vector<std::vector<rdzv::RankProgressEntry>> shared_progress;
  uint32_t shared_threshold = 0;
  std::function<void(Result<rdzv::StragglerFinding>)> pending_stragglers;
  std::function<void(Result<std::vector<rdzv::NodeProgress>>)> pending_progress;
};

}  // namespace ddprun::agent::testing
