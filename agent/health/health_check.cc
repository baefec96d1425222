#include "agent/health/health_check.h"

#include <unistd.h>

#include <csignal>
#include <utility>

#include <fmt/format.h>

#include "agent/failure_report.h"

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

HealthCheck::HealthCheck(HealthCheckParts parts, HealthCheckOptions options)
    : launcher_(parts.launcher),
      options_(std::move(options)),
      timer_(parts.timeout_timer),
      interval_timer_(parts.interval_timer) {}

HealthCheck::~HealthCheck() { cancel(); }

void HealthCheck::run(const EnvMap& env, const std::string& output_base,
                      std::function<void(Status)> done) {
  kill_running();
  output_base_ = output_base;
  SpawnRequest request;
  request.executable = "/bin/sh";
  request.argv = {"sh", "-c", options_.command};
  request.envp = to_envp(env);
  request.stdout_target = {StdioTarget::Kind::kFile, output_base + ".stdout"};
  request.stderr_target = {StdioTarget::Kind::kFile, output_base + ".stderr"};
  auto spawned = launcher_.spawn(request);
  if (spawned) {
    if (Status started = launcher_.confirm_started(*spawned); !started) spawned = started;
  }
  if (!spawned) {
    done(Status::error("the health check could not start: " + spawned.error_message()));
    return;
  }
  pid_ = spawned->pid;
  timed_out_ = false;
  done_ = std::move(done);
  timer_.arm(options_.timeout, [this, pid = *pid_] {
    if (pid_ != pid) return;
    timed_out_ = true;
    launcher_.signal_group(pid, SIGKILL);  // its exit finishes it
  });
}

bool HealthCheck::on_child_exit(pid_t pid, ExitStatus status) {
  if (pid_ != pid) return false;
  launcher_.signal_group(pid, SIGKILL);  // anything it left running in its group
  launcher_.release_group(pid);
  pid_.reset();
  timer_.cancel();
  const std::string out = output_base_ + ".stdout";
  const std::string err = output_base_ + ".stderr";
  if (status.success() && !timed_out_) {
    ::unlink(out.c_str());
    ::unlink(err.c_str());
    finish(Status());
    return true;
  }
  const std::string how =
      timed_out_      ? fmt::format("it did not finish within {} s (--health_check_timeout)",
                                    std::chrono::duration<double>(options_.timeout).count())
      : status.signal ? fmt::format("it was killed by signal {}", status.signal)
                      : fmt::format("it exited with status {}", status.code);
  finish(Status::error(describe_failed_check(how, out, err)));
  return true;
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
