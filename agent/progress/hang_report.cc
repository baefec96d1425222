#include "agent/progress/hang_report.h"

#include <algorithm>
#include <csignal>
#include <utility>

#include "agent/progress/hang_culprits.h"
#include "agent/progress/rank_activity.h"

namespace ddprun::agent {

std::vector<WorkerFailure> hung_failures(const std::vector<RankProgress>& ranks) {
  std::vector<WorkerFailure> failures;
  for (const RankProgress& r : ranks) {
    WorkerFailure f;
    f.rank = r.rank;
    f.local_rank = r.local_rank;
    f.hostname = r.node;
    f.hung = true;
    failures.push_back(std::move(f));
  }
  return failures;
}

void read_hung_stacks(std::vector<RankProgress>& ranks,
                      const std::function<std::vector<std::string>(int local_rank)>& stack_of) {
  for (RankProgress& r : ranks) {
    const ActivityFinding finding = read_activity(stack_of(r.local_rank));
    r.activity = finding.activity;
    r.where = finding.where;
  }
}

std::vector<WorkerFailure> hang_culprit_failures(const FailureReport& report,
                                                 const std::vector<RankProgress>& job,
                                                 WallTime now) {
  const CulpritFinding finding = find_hang_culprits(job);
  std::vector<WorkerFailure> failures;
  for (const RankProgress& culprit : finding.culprits) {
    WorkerFailure f;
    auto local = std::find_if(report.failures.begin(), report.failures.end(),
                              [&](const WorkerFailure& w) { return w.rank == culprit.rank; });
    if (local != report.failures.end()) {
      f = *local;
    } else {
      f.rank = culprit.rank;
      f.local_rank = culprit.local_rank;
      f.hostname = culprit.node;
      f.exit = ExitStatus::killed(SIGABRT);
      f.time = format_report_time(now);
    }
    f.hung = true;
    f.error_message = format_hang_root_cause(culprit, finding);
    if (!f.error_file_written && !f.stderr_tail.empty()) {
      f.traceback = "(the stack the worker printed when it was stopped: see its stderr below)";
    }
    failures.push_back(std::move(f));
  }
  return failures;
}

}  // namespace ddprun::agent
