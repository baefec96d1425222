#include "agent/agent.h"

#include <algorithm>
#include <csignal>
#include <cstdio>

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include "common/exit_codes.h"

namespace ddprun::agent {
namespace {

// Bound on waiting for workers' output pipes to close after they exit: a grandchild that
// escaped its process group may hold one open forever.
constexpr Millis kOutputDrainTimeout{2000};
constexpr std::size_t kStderrTailLines = 20;
// A hung worker's stack dump (every thread's) is longer than an ordinary error's tail.
constexpr std::size_t kHungStackLines = 120;
// After a hang verdict in a multi-node job: how long to wait for the other nodes' verdicts
// before stopping this node's workers anyway (their ranks may still be heartbeating), and for
// their stacks before naming culprits without them. The second covers a node stopping its
// workers (SIGABRT, the stack printed) and draining their output (kOutputDrainTimeout).
constexpr Millis kHangAgreementTimeout{2000};
constexpr Millis kHangStacksTimeout{5000};

StdioTarget stdio_target(const StreamRoute& route, const std::string& file) {
  if (route.via_agent()) return {StdioTarget::Kind::kPipe, ""};
  if (route.to_file) return {StdioTarget::Kind::kFile, file};
  return {StdioTarget::Kind::kInherit, ""};
}

}  // namespace

Agent::Agent(AgentOptions options, boost::asio::io_context& io, AgentParts parts)
    : options_(std::move(options)),
      io_(io),
      launcher_(parts.launcher),
      coordinator_(parts.coordinator),
      clock_(parts.clock),
      store_(parts.store),
      progress_watch_(parts.progress),
      log_files_(parts.log_files),
      shutdown_timer_(parts.shutdown_timer),
      drain_timer_(parts.drain_timer),
      signals_(parts.signals),
      channel_(parts.channel),
      base_env_(current_environment()),
      output_(io),
      hang_investigation_(io, parts.coordinator),
      health_check_(io, parts.launcher, options_.health_check) {
  progress_watch_.set_events({[this](const HangVerdict& v) { on_hang(v); },
                              [](const TimerExpiry& e) {
                                spdlog::warn(
                                    "torch's file timer: scope '{}' of pid {} expired; sent it {}",
                                    e.scope_id, e.pid, signal_name(e.signal));
                              },
                              [this](const std::vector<LocalRankProgress>& p) { share(p); }});
  signals_.watch([this](int signo) { on_signal(signo); });
  channel_.set_handler([this](const WorkerNotice& notice) { on_worker_notice(notice); });
  launcher_.set_exit_handler([this](pid_t pid, ExitStatus status) { on_child_exit(pid, status); });
}

Agent::~Agent() {
  launcher_.set_exit_handler(nullptr);
  channel_.set_handler(nullptr);
  signals_.stop();
  progress_watch_.set_events({});
}

int Agent::run() {
  start();
  if (!exit_code_) io_.run();
  launcher_.end_all_children();  // grandchildren that escaped their group, the sentinel
  return exit_code_.value_or(1);
}

void Agent::start() {
  if (phase_ != Phase::kIdle) return;  // a signal may already have ended the job
  auto dir = log_files_.create_run_dir(options_.logs, options_.run_id, options_.nproc_per_node);
  if (!dir) {
    spdlog::error("{}", dir.error_message());
    finish(1);
    return;
  }
  log_dir_ = std::move(dir.value());
  coordinator_.set_event_handler([this](const CoordinatorEvent& e) { on_coordinator_event(e); });
  begin_round();
}

void Agent::on_child_exit(pid_t pid, ExitStatus status) {
  if (health_check_.on_child_exit(pid, status)) return;
  if (!group_) return;
  if (status.stopped) {
    if (group_->on_child_stopped(pid, status.signal) && !is_job_control_stop(status.signal)) {
      spdlog::warn("worker pid {} was stopped by {}; the job waits until it is continued (SIGCONT)",
                   pid, signal_name(status.signal));
    }
    return;
  }
  group_->on_child_exit(pid, status);
  // Any other pid is an adopted grandchild: reaping it was all there was to do.
}

// A worker's bootstrap says its script raised: the rest are stopped now, not once the failing
// interpreter has finished shutting down.
void Agent::on_worker_notice(const WorkerNotice& notice) {
  if (phase_ != Phase::kSupervising || !group_ || interrupt_.kind != Interrupt::Kind::kNone) return;
  if (!group_->worker_failing(notice.pid)) return;  // not a running worker of this attempt
  spdlog::debug("worker pid {} raised {}; stopping the others", notice.pid, notice.message);
  if (!failed_at_) failed_at_ = clock_.steady_now();
}

void Agent::begin_round() {
  phase_ = Phase::kJoining;
  join_started_ = clock_.steady_now();
  notify([&](AgentObserver& o) { o.on_joining(attempt_); });
  interrupt_ = {};  // a rejoin that asked for this round has been served by it
  if (health_check_.enabled()) return check_health_then_join();
  join_round();
}

// --health_check: a node that is not fit to train does not join; the others go on without it
// (it leaves the job as this agent ends) and ddprun exits kExitUnhealthy for the node manager.
EnvMap Agent::health_check_env() const {
  EnvMap env = base_env_;
  for (const auto& [key, value] : options_.extra_env) env[key] = value;
  env["LOCAL_WORLD_SIZE"] = std::to_string(options_.nproc_per_node);
  env["TORCHELASTIC_RUN_ID"] = options_.run_id;
  env["DDPRUN_ATTEMPT"] = std::to_string(attempt_);
  return env;
}

// The periodic check failed while the workers ran: stop them and leave the job (the others go
// on as after a lost node); not a worker failure, so no restart is charged.
void Agent::on_unhealthy(const Status& why) {
  if (phase_ != Phase::kSupervising && phase_ != Phase::kDraining) return;
  spdlog::error("{}; stopping the workers and leaving the job", why.message());
  notify([&](AgentObserver& o) { o.on_health_check_failed(why.message()); });
  Interrupt unhealthy{Interrupt::Kind::kUnhealthy, 0, {}};
  unhealthy.event.report.entrypoint = options_.command.display_name;
  unhealthy.event.report.cause = why.message();
  unhealthy.event.exit_code = kExitUnhealthy;
  interrupt(std::move(unhealthy));
  if (phase_ == Phase::kSupervising) group_->stop(SIGTERM);
}

void Agent::check_health_then_join() {
  health_check_.run(
      health_check_env(), log_dir_->path() + "/health_check_" + std::to_string(attempt_),
      [this](const Status& healthy) {
        if (phase_ != Phase::kJoining) return;
        if (healthy) return join_round();
        spdlog::error("{}", healthy.message());
        notify([&](AgentObserver& o) { o.on_health_check_failed(healthy.message()); });
        finish(kExitUnhealthy);
      });
}

void Agent::join_round() {
  JoinOffer offer;
  offer.local_world_size = options_.nproc_per_node;
  offer.master_addr = options_.master_addr;
  auto port = store_.offer_port();
  if (!port) {
    spdlog::error("{}", port.error_message());
    finish(1);
    return;
  }
  offer.master_port = *port;
  coordinator_.join(offer, [this](Result<RoundAssignment> assignment) {
    if (phase_ != Phase::kJoining) return;
    if (!assignment) {
      spdlog::error("rendezvous failed: {}", assignment.error_message());
      finish(1);
      return;
    }
    notify([&](AgentObserver& o) {
      o.on_round_assigned(*assignment,
                          std::chrono::duration_cast<Millis>(clock_.steady_now() - join_started_));
    });
    if (Status hosted = store_.on_assigned(*assignment); !hosted) {
      spdlog::error("{}", hosted.message());
      finish(1);
      return;
    }
    start_workers(*assignment);
  });
}

void Agent::start_workers(const RoundAssignment& assignment) {
  if (Status s = log_files_.prepare_attempt(*log_dir_, attempt_, options_.nproc_per_node); !s) {
    spdlog::error("{}", s.message());
    finish(1);
    return;
  }
  open_filtered_logs();
  if (Status s = progress_watch_.begin_attempt(log_dir_->attempt_dir(attempt_) + "/progress",
                                               options_.nproc_per_node);
      !s) {
    spdlog::error("{}", s.message());
    finish(1);
    return;
  }
  hang_investigation_.cancel();
  hang_ranks_.clear();
  if (!stragglers_.current().stragglers.empty()) {  // named in the last attempt: judged afresh
    stragglers_.reset();
    notify([&](AgentObserver& o) { o.on_stragglers(stragglers_.current()); });
  }
  auto launches = make_launches(assignment);
  spdlog::debug("starting {} workers: attempt {}, restart count {}, master {}:{}", launches.size(),
                attempt_, assignment.restart_count, assignment.master_addr, assignment.master_port);
  WorkerGroupOptions group_options{options_.shutdown_timeout, options_.hostname};
  assignment_ = assignment;
  phase_ = Phase::kSupervising;
  WorkerGroupObserver& observer = *this;
  group_ =
      std::make_unique<WorkerGroup>(group_options, launcher_, shutdown_timer_, clock_, observer);
  group_->start(std::move(launches));
  if (phase_ == Phase::kSupervising) {
    progress_watch_.workers_running();
    health_check_.watch(health_check_env(),
                        log_dir_->path() + "/health_check_" + std::to_string(attempt_),
                        [this](const Status& why) { on_unhealthy(why); });
    notify([&](AgentObserver& o) {
      o.on_workers_started(assignment, options_.nproc_per_node, failed_at_);
    });
    failed_at_.reset();
  }
}

std::vector<WorkerLaunch> Agent::make_launches(const RoundAssignment& a) {
  AttemptContext context;
  context.role = options_.role;
  context.master_addr = a.master_addr;
  context.master_port = a.master_port;
  context.restart_count = a.restart_count;
  context.max_restarts = a.max_restarts;
  context.run_id = options_.run_id;
  context.use_agent_store = a.use_agent_store;
  context.legacy_nccl_env = options_.legacy_nccl_env;
  for (int signo : options_.signals_to_handle) {
    if (!context.signals_to_handle.empty()) context.signals_to_handle += ",";
    context.signals_to_handle += signal_name(signo);
  }
  context.virtual_local_rank = options_.virtual_local_rank;
  EnvMap base = base_env_;
  for (const auto& [key, value] : options_.extra_env) base[key] = value;

  std::vector<WorkerLaunch> launches;
  for (int local_rank = 0; local_rank < options_.nproc_per_node; ++local_rank) {
    WorkerPlacement p;
    p.local_rank = local_rank;
    p.rank = a.rank_offset + local_rank;
    p.group_rank = a.group_rank;
    p.group_world_size = a.group_world_size;
    p.local_world_size = options_.nproc_per_node;
    p.world_size = a.world_size;
    p.role_rank = p.rank;
    p.role_world_size = a.world_size;
    WorkerLaunch launch;
    launch.local_rank = local_rank;
    launch.rank = p.rank;
    launch.error_file = log_dir_->error_file(attempt_, local_rank);
    launch.request.executable = options_.command.executable;
    launch.request.argv = options_.command.argv;
    EnvMap env = build_worker_env(base, context, p, launch.error_file);
    for (auto& [key, value] : progress_watch_.worker_env(local_rank)) env[key] = value;
    for (auto& [key, value] : channel_.worker_env()) env[key] = value;
    launch.request.envp = to_envp(env);
    launch.request.stdout_target = stdio_target(plan_stream(options_.logs, local_rank, kStdout),
                                                log_dir_->stdout_log(attempt_, local_rank));
    launch.request.stderr_target = stdio_target(plan_stream(options_.logs, local_rank, kStderr),
                                                log_dir_->stderr_log(attempt_, local_rank));
    if (static_cast<std::size_t>(local_rank) < options_.cpu_binding.size()) {
      launch.request.cpu_affinity = options_.cpu_binding[local_rank];
    }
    launches.push_back(std::move(launch));
  }
  return launches;
}

// attempt_<N>/filtered_{stdout,stderr}.log, shared by every rank's tee'd stream, when
// --duplicate-*-filters asks for them.
void Agent::open_filtered_logs() {
  const StdStreams streams[2] = {kStdout, kStderr};
  for (int i = 0; i < 2; ++i) {
    const auto& filters =
        i == 0 ? options_.logs.duplicate_stdout_filters : options_.logs.duplicate_stderr_filters;
    filtered_logs_[i].reset();
    if (filters.empty()) continue;
    auto fd = log_files_.open_log(log_dir_->filtered_log(attempt_, streams[i]));
    if (!fd) {
      spdlog::warn("{}", fd.error_message());
      continue;
    }
    filtered_logs_[i] = std::move(*fd);
  }
}

void Agent::on_worker_started(const WorkerLaunch& launch, SpawnedProcess& process) {
  const std::string prefix = line_prefix(options_.logs.line_prefix_template, options_.role,
                                         launch.rank, launch.local_rank, options_.hostname);
  auto route = [&](UniqueFd& pipe, StdStreams stream, int console_fd, const std::string& file) {
    if (!pipe.valid()) return;
    const StreamRoute plan = plan_stream(options_.logs, launch.local_rank, stream);
    OutputRouter::Sinks sinks;
    sinks.console_fd = plan.to_console ? console_fd : -1;
    sinks.prefix = plan.teed() ? prefix : "";  // a captured-only stream passes through as is
    sinks.file_path = plan.to_file ? file : "";
    sinks.duplicate = {filtered_logs_[stream == kStdout ? 0 : 1],
                       stream == kStdout ? options_.logs.duplicate_stdout_filters
                                         : options_.logs.duplicate_stderr_filters};
    if (plan.captured) {
      sinks.tail = std::make_shared<LineTail>();
      stderr_tails_[launch.local_rank] = sinks.tail;
    }
    if (Status s = output_.attach(std::move(pipe), std::move(sinks)); !s) {
      spdlog::warn("worker {}: {}", launch.local_rank, s.message());
    }
  };
  progress_watch_.worker_started(launch.local_rank, process.pid);
  notify([&](AgentObserver& o) { o.on_worker_started(launch.local_rank, process.pid); });
  route(process.stdout_pipe, kStdout, STDOUT_FILENO,
        log_dir_->stdout_log(attempt_, launch.local_rank));
  route(process.stderr_pipe, kStderr, STDERR_FILENO,
        log_dir_->stderr_log(attempt_, launch.local_rank));
}

void Agent::on_worker_exited(const WorkerLaunch& launch, pid_t pid, const ExitStatus& status) {
  progress_watch_.worker_exited(launch.local_rank, pid);  // first: the pid may be reused after this
  // Only a worker's own failure counts; workers we stop (a signal, a rejoin) do not.
  if (!status.success() && !failed_at_ && phase_ == Phase::kSupervising &&
      interrupt_.kind == Interrupt::Kind::kNone) {
    failed_at_ = clock_.steady_now();
  }
  notify([&](AgentObserver& o) { o.on_worker_exited(launch.local_rank, pid, status); });
}

void Agent::on_group_finished(const GroupResult& result) {
  if (std::string summary = stragglers_.summary(); !summary.empty()) spdlog::info("{}", summary);
  notify([&](AgentObserver& o) { o.on_group_finished(result); });
  if (phase_ == Phase::kSupervising) phase_ = Phase::kDraining;
  // The group is still on the stack: continue from the event loop.
  boost::asio::post(io_, [this, result] { after_group(result); });
}

void Agent::after_group(const GroupResult& result) {
  store_.end_round();      // every worker has exited: the store has served its round
  health_check_.cancel();  // the periodic check ends with the workers
  progress_watch_.end_attempt();
  drain_timer_.arm(kOutputDrainTimeout, [this] { output_.close_all(); });
  output_.when_drained([this, result] {
    drain_timer_.cancel();
    ++attempt_;
    if (phase_ != Phase::kDraining) return;  // finished meanwhile
    switch (interrupt_.kind) {
      case Interrupt::Kind::kSignal:
        spdlog::warn("stopped workers on {}", signal_name(interrupt_.signo));
        return finish(128 + interrupt_.signo);
      case Interrupt::Kind::kJobFailed:  // the job's report
      case Interrupt::Kind::kUnhealthy:  // the health check as root cause, not our workers
        return end_with_job_failure(interrupt_.event);
      case Interrupt::Kind::kRejoin:
        // The round is already over for everyone (a node left or failed): a failure of ours
        // in it is a consequence, and reporting it would be ignored. Join the next round.
        return begin_round();
      case Interrupt::Kind::kNone:
        break;
    }
    phase_ = Phase::kReporting;
    if (result.outcome == GroupResult::Outcome::kFailed) return handle_failure(result);
    coordinator_.report_success([this](const Status& s) {
      if (phase_ != Phase::kReporting) return;
      if (!s) spdlog::error("{}", s.message());
      launcher_.workers_done();  // before the last work, which its exit then overlaps
      finish(s ? 0 : 1);
    });
  });
}

void Agent::handle_failure(const GroupResult& result) {
  FailureReport report = build_report(result);
  if (!hang_ranks_.empty()) return settle_hang(std::move(report));
  send_report(report);
}

void Agent::send_report(const FailureReport& report) {
  coordinator_.report_failure(report, [this, report](Coordinator::FailureDecision decision) {
    if (phase_ != Phase::kReporting) return;
    // The job's report (identical on every node) when the coordinator has one, else ours;
    // with the coordinator's cause, when the job ended outside the workers (rendezvous lost).
    FailureReport shown = decision.report.failures.empty() ? report : decision.report;
    if (!decision.report.cause.empty()) shown.cause = decision.report.cause;
    if (decision.restart) {
      notify([&](AgentObserver& o) { o.on_restart(decision.counted); });
      const auto& root = shown.root_cause();
      if (decision.counted) {
        spdlog::warn("worker group failed (rank {} exitcode {}); restarting ({} restarts allowed)",
                     root.rank, root.exit.torchrun_code(), assignment_->max_restarts);
      } else {
        spdlog::warn(
            "worker group failed (rank {} exitcode {}) as the round ended elsewhere; "
            "joining the next round",
            root.rank, root.exit.torchrun_code());
      }
      begin_round();
      return;
    }
    (void)std::fputs(shown.render().c_str(), stderr);
    finish(decision.exit_code);
  });
}

FailureReport Agent::build_report(const GroupResult& result) const {
  FailureReport report;
  report.entrypoint = options_.command.display_name;
  report.interpreter = options_.command.interpreter;
  report.failures = result.failures;
  const int attempt = attempt_ - 1;  // the attempt that just ended
  for (WorkerFailure& f : report.failures) {
    load_error_file(f);
    f.stderr_tail =
        stderr_lines(f.local_rank, attempt, f.hung ? kHungStackLines : kStderrTailLines);
  }
  return report;
}

// The last `count` lines the worker of `local_rank` wrote to stderr in `attempt`, when they were
// captured (in memory, or in its log file); empty otherwise.
std::vector<std::string> Agent::stderr_lines(int local_rank, int attempt, std::size_t count) const {
  auto tail = stderr_tails_.find(local_rank);
  if (tail != stderr_tails_.end()) return tail->second->last(count);
  if (plan_stream(options_.logs, local_rank, kStderr).to_file) {
    return log_files_.last_lines(log_dir_->stderr_log(attempt, local_rank), count);
  }
  return {};
}

void Agent::on_signal(int signo) {
  if (phase_ == Phase::kDone) return;
  interrupt({Interrupt::Kind::kSignal, signo, {}});
  switch (phase_) {
    case Phase::kSupervising:
      spdlog::warn("received {}: forwarding it to every worker group", signal_name(signo));
      group_->stop(signo);  // a second signal escalates to SIGKILL
      return;
    case Phase::kDraining:
      return;  // after_group() ends the job once the output is drained
    default:
      return finish(128 + signo);  // no workers (waiting for a round, or reporting)
  }
}

void Agent::on_coordinator_event(const CoordinatorEvent& event) {
  if (phase_ == Phase::kDone) return;
  spdlog::info("{}", event.reason);
  const bool job_failed = event.kind == CoordinatorEvent::Kind::kJobFailed;
  if (phase_ == Phase::kReporting && !job_failed) {
    // Only at the exit barrier (a failure report's answer comes through its callback): the
    // round did not finish on every node, and the job restarts as a whole.
    return begin_round();
  }
  if (phase_ != Phase::kSupervising && phase_ != Phase::kDraining) {
    // Joining or reporting: the pending coordinator call carries the outcome; only a job
    // failure ends things here.
    if (job_failed) end_with_job_failure(event);
    return;
  }
  interrupt(job_failed ? Interrupt{Interrupt::Kind::kJobFailed, 0, event}
                       : Interrupt{Interrupt::Kind::kRejoin, 0, {}});
  if (phase_ == Phase::kSupervising) group_->stop(SIGTERM);
  // Otherwise the group is draining its output; after_group() acts on the interrupt.
}

std::vector<RankProgress> Agent::progress() const {
  if (phase_ != Phase::kSupervising) return {};
  std::vector<LocalRankProgress> running;
  for (const LocalRankProgress& p : progress_watch_.progress()) {
    if (p.state != RankState::kExited) running.push_back(p);
  }
  return global(running);
}

// Not while a hang is investigated: that shares its own.
void Agent::share(const std::vector<LocalRankProgress>& progress) {
  if (!hang_ranks_.empty() || phase_ != Phase::kSupervising) return;
  const uint32_t threshold = options_.progress.straggler_threshold_milli;
  if (!coordinator_.shares_progress() && threshold == 0) return;
  coordinator_.share_progress(global(progress), threshold,
                              [this](const rdzv::StragglerFinding& finding) {
                                // An answer for an attempt that has ended says nothing now.
                                if (phase_ != Phase::kSupervising || !hang_ranks_.empty()) return;
                                stragglers_.update(finding);
                                notify([&](AgentObserver& o) { o.on_stragglers(finding); });
                              });
}

std::vector<RankProgress> Agent::rank_progress() const {
  if (!progress_watch_.watching() || !assignment_) return {};
  return global(progress_watch_.progress());
}

// This node's ranks' progress under their global ranks, named by this node.
std::vector<RankProgress> Agent::global(const std::vector<LocalRankProgress>& local) const {
  std::vector<RankProgress> ranks;
  ranks.reserve(local.size());
  const int offset = assignment_ ? assignment_->rank_offset : 0;
  for (const LocalRankProgress& p : local) {
    ranks.push_back(
        to_rank_progress(p, offset + p.local_rank,
                         options_.node_name.empty() ? options_.hostname : options_.node_name));
  }
  return ranks;
}

// Ranks stopped making progress. Which one stopped first shows in what each was doing, and
// only their stacks say that: every worker of the job is stopped with SIGABRT (Python prints
// every thread's stack, SDK programs theirs), and the culprits are named once the stacks are
// read (settle_hang). In a multi-node job the nodes first wait for each other's verdicts, so
// that no rank dies of a lost peer before its own node has seen the hang.
void Agent::on_hang(const HangVerdict& verdict) {
  if (phase_ != Phase::kSupervising || !assignment_ || !hang_ranks_.empty()) return;
  hang_ranks_ = global(progress_watch_.progress());
  for (RankProgress& r : hang_ranks_) r.activity = RankActivity::kStopping;
  group_->stop_failures_with(SIGABRT);  // a rank dying of the hang leaves the others' stacks
  // Silence alone does not say which rank stopped first (the ranks waiting for it fall silent
  // too): the culprit is named once the stacks are read (report_hang), and not before.
  spdlog::warn(
      "hang detected: no progress on this node for {} s; stopping the workers with SIGABRT to "
      "see where each rank is, then naming the one that stopped first",
      format_hang_seconds(verdict.hung.front().silent_for));
  if (!coordinator_.shares_progress() || assignment_->world_size <= options_.nproc_per_node) {
    return stop_hung();
  }
  const int round = assignment_->round;
  hang_investigation_.await_verdicts(
      hang_ranks_, assignment_->world_size, kHangAgreementTimeout,
      [this, round](const std::vector<RankProgress>&) {
        if (phase_ == Phase::kSupervising && assignment_ && assignment_->round == round) {
          stop_hung();
        }
      });
}

void Agent::stop_hung() {
  std::vector<WorkerFailure> failures;
  for (const RankProgress& r : hang_ranks_) {
    WorkerFailure f;
    f.rank = r.rank;
    f.local_rank = r.local_rank;
    f.hostname = r.node;
    f.hung = true;
    failures.push_back(std::move(f));
  }
  group_->fail_running(failures, SIGABRT);
}

// The workers of a hung attempt have exited: read what each was doing from its stack, learn
// the other nodes' (multi-node), then name the culprits.
void Agent::settle_hang(FailureReport report) {
  const int attempt = attempt_ - 1;
  std::vector<RankProgress> local = hang_ranks_;
  for (RankProgress& r : local) {
    const ActivityFinding finding =
        read_activity(stderr_lines(r.local_rank, attempt, kHungStackLines));
    r.activity = finding.activity;
    r.where = finding.where;
  }
  if (!coordinator_.shares_progress() || !assignment_ ||
      assignment_->world_size <= options_.nproc_per_node) {
    return report_hang(std::move(report), local);
  }
  const int round = assignment_->round;
  hang_investigation_.await_stacks(
      local, assignment_->world_size, kHangStacksTimeout,
      [this, round, report = std::move(report)](const std::vector<RankProgress>& job) {
        if (phase_ == Phase::kReporting && assignment_ && assignment_->round == round) {
          report_hang(report, job);
        }
      });
}

// Names the culprits among every rank of the job (`job`): this node's with their stacks, the
// others' by node and rank, as the report's failures.
void Agent::report_hang(FailureReport report, const std::vector<RankProgress>& job) {
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
      f.time = format_report_time(clock_.wall_now());
    }
    f.hung = true;
    f.error_message = format_hang_root_cause(culprit, finding);
    if (!f.error_file_written && !f.stderr_tail.empty()) {
      f.traceback = "(the stack the worker printed when it was stopped: see its stderr below)";
    }
    spdlog::error("{}", f.error_message);
    failures.push_back(std::move(f));
  }
  if (!failures.empty()) report.failures = std::move(failures);
  hang_ranks_.clear();
  send_report(report);
}

void Agent::interrupt(Interrupt what) {
  if (what.kind > interrupt_.kind) interrupt_ = std::move(what);
}

void Agent::end_with_job_failure(const CoordinatorEvent& event) {
  if (!event.report.failures.empty() || !event.report.cause.empty()) {
    (void)std::fputs(event.report.render().c_str(), stderr);
  } else {
    spdlog::error("{}", event.reason);
  }
  finish(event.exit_code);
}

void Agent::finish(int exit_code) {
  if (phase_ == Phase::kDone) return;
  if (phase_ == Phase::kSupervising) {
    // Only reached on internal errors: never leave workers behind. They are reaped with every
    // other child once the loop has stopped (run(): end_all_children).
    for (pid_t pid : group_->running_pids()) launcher_.signal_group(pid, SIGKILL);
  }
  phase_ = Phase::kDone;
  exit_code_ = exit_code;
  hang_investigation_.cancel();
  health_check_.cancel();
  launcher_.workers_done();
  notify([&](AgentObserver& o) { o.on_job_finished(exit_code); });
  coordinator_.close();
  signals_.stop();
  shutdown_timer_.cancel();
  drain_timer_.cancel();
  output_.close_all();
  if (log_dir_) {
    // Nothing of the run stays in memory; what a user needs stays on disk, and is named.
    if (auto kept = log_files_.finish_run(*log_dir_)) {
      spdlog::info("the run's log and error files are kept in {}", *kept);
    }
  }
  io_.stop();
}

}  // namespace ddprun::agent
