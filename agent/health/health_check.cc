#include "agent/health/health_check.h"

#include <unistd.h>

#include <csignal>
#include <fstream>
#include <iterator>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agent/failure_report.h"
#include "agent/health/builtin/node_check_main.h"

namespace ddprun::agent {
namespace {

constexpr std::size_t kOutputLines = 10;

void append_tail(std::string& out, const char* name, const std::string& path) {
  const std::vector<std::string> lines = read_last_lines(path, kOutputLines);
  if (lines.empty()) return;
  out += fmt::format("\n  its {} (last {} lines, {}):", name, lines.size(), path);
  for (const std::string& line : lines) out += "\n    " + line;
}

}  // namespace

HealthCheck::HealthCheck(HealthCheckParts parts, HealthCheckOptions options,
                         std::string node_address)
    : launcher_(parts.launcher),
      options_(std::move(options)),
      node_address_(std::move(node_address)),
      value_(builtin::split_health_check(options_.command)),
      timer_(parts.timeout_timer),
      interval_timer_(parts.interval_timer) {}

HealthCheck::~HealthCheck() { cancel(); }

void HealthCheck::run(const EnvMap& env, const std::string& output_base,
                      std::function<void(Status)> done) {
  kill_running();
  if (!value_) {
    done(Status::invalid_argument("--health_check: " + value_.error_message()));
    return;
  }
  output_base_ = output_base;
  env_ = env;
  timed_out_ = false;
  done_ = std::move(done);
  // One bound for the whole run, built-in checks and command together.
  timer_.arm(options_.timeout, [this] {
    if (!pid_) return;
    timed_out_ = true;
    launcher_.signal_group(*pid_, SIGKILL);  // its exit finishes it
  });
  start(
      {!value_->builtin.empty(), value_->builtin.empty() ? output_base : output_base + "_builtin"});
}

void HealthCheck::start(Step step) {
  SpawnRequest request;
  if (step.builtin) {
    // This program again, in its check mode: /proc/self/exe names it whatever its path was.
    request.executable = "/proc/self/exe";
    request.argv =
        builtin::node_check_argv(value_->builtin, node_address_, step.output_base + ".json");
  } else {
    request.executable = "/bin/sh";
    request.argv = {"sh", "-c", value_->command};
  }
  request.envp = to_envp(env_);
  request.stdout_target = {StdioTarget::Kind::kFile, step.output_base + ".stdout"};
  request.stderr_target = {StdioTarget::Kind::kFile, step.output_base + ".stderr"};
  auto spawned = launcher_.spawn(request);
  if (spawned) {
    if (Status started = launcher_.confirm_started(*spawned); !started) spawned = started;
  }
  if (!spawned) {
    timer_.cancel();
    finish(Status::error("the health check could not start: " + spawned.error_message()));
    return;
  }
  pid_ = spawned->pid;
  step_ = std::move(step);
}

bool HealthCheck::on_child_exit(pid_t pid, ExitStatus status) {
  if (pid_ != pid) return false;
  launcher_.signal_group(pid, SIGKILL);  // anything it left running in its group
  launcher_.release_group(pid);
  pid_.reset();
  if (!done_) return true;  // cancelled: nothing more runs
  if (step_.builtin) read_outcomes(step_);
  const std::string out = step_.output_base + ".stdout";
  const std::string err = step_.output_base + ".stderr";
  if (!status.success() || timed_out_) {
    timer_.cancel();
    finish(failure_of(step_, status));
    return true;
  }
  ::unlink(out.c_str());
  ::unlink(err.c_str());
  if (step_.builtin && !value_->command.empty()) {
    start({false, output_base_});  // the built-in checks passed: the command's turn
    return true;
  }
  timer_.cancel();
  finish(Status());
  return true;
}

Status HealthCheck::failure_of(const Step& step, const ExitStatus& status) const {
  const std::string what =
      step.builtin ? fmt::format("its built-in checks (builtin:{})", value_->builtin) : "it";
  std::string how;
  if (timed_out_) {
    how = fmt::format("{} did not finish within {} s (--health_check_timeout)", what,
                      std::chrono::duration<double>(options_.timeout).count());
  } else if (status.signal) {
    how = fmt::format("{} was killed by signal {}", what, status.signal);
  } else if (step.builtin && status.code == 1) {
    how = what + " found a problem";
  } else {
    how = fmt::format("{} exited with status {}", what, status.code);
  }
  return Status::error(
      describe_failed_check(how, step.output_base + ".stdout", step.output_base + ".stderr"));
}

// The child's findings per kind, for the metrics; none when it was killed before writing them.
void HealthCheck::read_outcomes(const Step& step) {
  const std::string path = step.output_base + ".json";
  std::ifstream in(path);
  if (!in) return;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ::unlink(path.c_str());
  auto outcomes = builtin::outcomes_from_json(text);
  if (!outcomes) {
    spdlog::warn("{}: {}", path, outcomes.error_message());
    return;
  }
  if (on_outcomes_) on_outcomes_(*outcomes);
}

void HealthCheck::watch(EnvMap env, std::string output_base,
                        std::function<void(Status)> on_failure) {
  cancel();
  if (!enabled() || options_.interval <= Millis(0)) return;
  watch_env_ = std::move(env);
  watch_base_ = std::move(output_base);
  on_failure_ = std::move(on_failure);
  schedule_next();
}

void HealthCheck::schedule_next() {
  interval_timer_.arm(options_.interval, [this] {
    if (!on_failure_) return;
    run(watch_env_, watch_base_, [this](const Status& healthy) {
      if (!on_failure_) return;
      if (healthy) return schedule_next();
      std::exchange(on_failure_, nullptr)(healthy);
    });
  });
}

void HealthCheck::cancel() {
  on_failure_ = nullptr;
  interval_timer_.cancel();
  kill_running();
}

void HealthCheck::kill_running() {
  done_ = nullptr;
  timer_.cancel();
  if (pid_) launcher_.signal_group(*pid_, SIGKILL);  // reaped with the agent's other children
}

void HealthCheck::finish(Status status) {
  if (auto done = std::exchange(done_, nullptr)) done(std::move(status));
}

std::string describe_failed_check(const std::string& how, const std::string& stdout_path,
                                  const std::string& stderr_path) {
  std::string message = "this node failed its health check: " + how;
  append_tail(message, "stderr", stderr_path);
  append_tail(message, "stdout", stdout_path);
  return message;
}

}  // namespace ddprun::agent
