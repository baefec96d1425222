// Failure reports as JSON, through the code that really handles them: the agent's
// RendezvousCoordinator serialises its own report for the server (report_failure), and reads
// another node's from a RestartRequested or JobFailed push (from_json of FailureReport), then
// the agent renders it and takes its exit code. The input is both another node's report and
// the raw text of our own (a worker's stderr lines and message are arbitrary bytes).
//
// Properties: nothing throws out of the coordinator or crashes; a report read from a push
// renders; our own report's JSON is what the other nodes read back, field for field (when
// the text is valid UTF-8; otherwise it must still be sent as valid JSON).
#include <cstddef>
#include <cstdint>
#include <string>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "agent/coordination/rendezvous_coordinator.h"
#include "agent/failure_report.h"
#include "fuzz/fuzz_check.h"
#include "tests/agent/scripted_rendezvous_client.h"

using namespace ddprun;
using namespace ddprun::agent;

namespace {

// Our own report, its strings taken from the input as a worker's output would be.
FailureReport own_report(const std::string& text, uint8_t how) {
  WorkerFailure f;
  f.local_rank = 1;
  f.rank = 3;
  f.pid = 4242;
  f.exit = how % 3 == 0 ? ExitStatus::exited(how) : ExitStatus::killed(how % 65);
  f.time = "2026-01-01_12:00:00";
  f.hostname = "node-1";
  f.error_message = text;
  f.traceback = text;
  for (size_t at = 0; at <= text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    f.stderr_tail.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  FailureReport report;
  report.entrypoint = "train.py";
  report.failures.push_back(std::move(f));
  return report;
}

bool is_utf8(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

// What the agent does with a report it is handed: render it, take the root cause's codes.
void use(const FailureReport& report) {
  FUZZ_CHECK(!report.render().empty());
  (void)report.exit_code();
  if (!report.failures.empty()) (void)report.root_cause().exit.torchrun_code();
}

// A coordinator that has reported `ours` and is answered by a restart push carrying `theirs`.
// Returns the JSON it sent and the report it decided with.
std::pair<std::string, FailureReport> report_and_restart(const FailureReport& ours,
                                                         const std::string& theirs) {
  testing::ScriptedRendezvousClient client;
  RendezvousCoordinator coordinator({.node_id = "node-1", .server = "127.0.0.1:1"}, client);
  std::optional<Coordinator::FailureDecision> decision;
  coordinator.report_failure(ours, [&](Coordinator::FailureDecision d) { decision = d; });
  FUZZ_CHECK(client.failure_reports.size() == 1);
  client.push(rdzv::RestartRequested{1, rdzv::RestartReason::kWorkerFailure, "failed", theirs});
  FUZZ_CHECK(decision && decision->restart && decision->counted);
  return {client.failure_reports[0].failure_report, decision->report};
}

// A JobFailed push carrying `theirs`, as a running node receives it.
void job_failed(const std::string& theirs) {
  testing::ScriptedRendezvousClient client;
  RendezvousCoordinator coordinator({.node_id = "node-2", .server = "127.0.0.1:1"}, client);
  std::optional<CoordinatorEvent> event;
  coordinator.set_event_handler([&](const CoordinatorEvent& e) { event = e; });
  client.push(rdzv::JobFailed{rdzv::JobFailureReason::kRestartsExhausted, "failed", theirs, 3});
  FUZZ_CHECK(event && event->kind == CoordinatorEvent::Kind::kJobFailed);
  FUZZ_CHECK(event->exit_code == 3);
  use(event->report);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // unreadable reports are logged; not the point here
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(fuzz::as_text(data, size));
  const FailureReport ours = own_report(text, size > 0 ? data[0] : 0);

  // The input as another node's report.
  auto [sent, theirs] = report_and_restart(ours, text);
  use(theirs);
  job_failed(text);

  // Our report as the other nodes read it.
  FUZZ_CHECK(nlohmann::json::accept(sent));
  auto [sent_again, read_back] = report_and_restart(ours, sent);
  use(read_back);
  if (is_utf8(text)) FUZZ_CHECK(nlohmann::json(read_back) == nlohmann::json(ours));
  return 0;
}
