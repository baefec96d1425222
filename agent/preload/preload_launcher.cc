#include "agent/preload/preload_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "agent/preload/preload_template_source.h"
#include "agent/python/python_bootstrap.h"
#include "common/private_dir.h"

namespace ddprun::agent {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr Millis kPollSlice{100};

std::string errno_text() { return std::strerror(errno); }

// Whether our child `pid` has exited (without reaping it: the launcher's reaper does that).
bool has_exited(pid_t pid) {
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    return errno == ECHILD;  // already reaped
  }
  return info.si_pid == pid;
}

// Waits until `fd` is readable, the deadline passes, or `pid` exits.
Status wait_readable(int fd, SteadyClock::time_point deadline, pid_t pid, const char* what) {
  for (;;) {
    const auto left = std::chrono::duration_cast<Millis>(deadline - SteadyClock::now());
    if (left <= Millis(0)) return Status::timed_out(std::string("timed out waiting for ") + what);
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min(left, kPollSlice).count()));
    if (n > 0) return {};
    if (n < 0 && errno != EINTR) return Status::error(std::string("poll: ") + errno_text());
    if (pid > 0 && has_exited(pid)) {
      return Status::closed(std::string("the template exited while waiting for ") + what);
    }
  }
}

// Sends all of `text`, with `fds` on its first byte (SCM_RIGHTS).
Status send_with_fds(int sock, const std::string& text, const std::vector<int>& fds) {
  iovec iov{const_cast<char*>(text.data()), text.size()};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()), 0);
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  ssize_t sent;
  do {
    sent = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) return Status::error("sending to the template: " + errno_text());
  for (size_t at = static_cast<size_t>(sent); at < text.size();) {
    const ssize_t n = ::send(sock, text.data() + at, text.size() - at, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::error("sending to the template: " + errno_text());
    at += static_cast<size_t>(n);
  }
  return {};
}

}  // namespace

PreloadLauncher::PreloadLauncher(PosixProcessLauncher& inner, PreloadOptions options)
    : inner_(inner), options_(std::move(options)) {
  // The template is our child: its exit is ours to handle, never a worker's.
  inner_.set_exit_handler([this](pid_t pid, ExitStatus status) {
    if (pid == template_pid_) {
      template_pid_ = -1;
      if (state_ != State::kGone) {
        give_up(status.signal ? "the template was killed by " + signal_name(status.signal)
                              : "the template exited with code " + std::to_string(status.code));
      }
      return;
    }
    if (exit_handler_) exit_handler_(pid, status);
  });
}

PreloadLauncher::~PreloadLauncher() {
  control_.reset();
  listener_.reset();
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

void PreloadLauncher::set_exit_handler(ExitHandler handler) { exit_handler_ = std::move(handler); }

Status PreloadLauncher::start() {
  auto dir = make_private_dir("ddprun-preload", "the preload template");
  if (!dir) return dir.status();
  dir_ = *dir;
  const std::string program = dir_ + "/template.py";
  {
    std::ofstream out(program, std::ios::trunc);
    out << kPreloadTemplateSource;
    if (!out.flush()) return Status::error("cannot write " + program);
  }
  // The bootstrap beside it: the template imports it, and each worker runs the script with it.
  if (Status written = write_python_bootstrap(dir_); !written) return written;
  const std::string socket_path = dir_ + "/control.sock";
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(address.sun_path)) {
    return Status::error("the preload socket path is too long: " + socket_path +
                         " (set TMPDIR to a shorter directory)");
  }
  std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
  listener_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listener_.valid()) return Status::error("socket: " + errno_text());
  if (::bind(listener_.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener_.get(), 1) != 0) {
    return Status::error("cannot listen on " + socket_path + ": " + errno_text());
  }
  SpawnRequest request;
  request.executable = options_.python;
  request.argv = {options_.python_argv0, "-u", program};
  request.envp = options_.env;
  request.envp.push_back("DDPRUN_PRELOAD_SOCKET=" + socket_path);
  std::string modules;
  for (const auto& m : options_.modules) modules += (modules.empty() ? "" : ",") + m;
  request.envp.push_back("DDPRUN_PRELOAD_MODULES=" + modules);
  auto spawned = inner_.spawn(request);
  if (!spawned) return spawned.status().with_context("starting the preload template");
  if (Status s = inner_.confirm_started(*spawned); !s) {
    return s.with_context("starting the preload template");
  }
  template_pid_ = spawned->pid;
  state_ = State::kStarting;
  spdlog::info("preload: a template interpreter (pid {}) imports {} while the node joins",
               template_pid_, modules);
  return {};
}

void PreloadLauncher::give_up(const std::string& why) {
  if (state_ == State::kGone) return;
  const bool was_ready = state_ == State::kReady;
  state_ = State::kGone;
  control_.reset();
  listener_.reset();
  if (template_pid_ > 0) inner_.signal_group(template_pid_, SIGKILL);
  spdlog::warn("preload: {}; {} workers start as fresh processes", why,
               was_ready ? "from now on," : "the");
}

Status PreloadLauncher::await_ready() {
  const auto deadline = SteadyClock::now() + options_.ready_timeout;
  if (!control_.valid()) {
    if (Status s = wait_readable(listener_.get(), deadline, template_pid_, "it to connect"); !s) {
      return s;
    }
    control_.reset(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!control_.valid()) return Status::error("accept: " + errno_text());
    ucred peer{};
    socklen_t length = sizeof peer;
    if (::getsockopt(control_.get(), SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0 ||
        peer.pid != template_pid_) {
      return Status::refused("a process other than the template (pid " + std::to_string(peer.pid) +
                             ") connected to its socket");
    }
    listener_.reset();  // one connection, ever
  }
  auto answer = read_answer(deadline, "its import");
  if (!answer) return answer.status();
  stats_.import_seconds = answer->value("import_seconds", 0.0);
  state_ = State::kReady;
  spdlog::info("preload: {} imported in {:.2f} s; workers are forked from the template",
               nlohmann::json(options_.modules).dump(), stats_.import_seconds);
  return {};
}

Result<nlohmann::json> PreloadLauncher::read_answer(SteadyClock::time_point deadline,
                                                    const char* what) {
  constexpr size_t kMostAnswerBytes = 1 << 16;
  while (pending_.find('\n') == std::string::npos) {
    if (pending_.size() > kMostAnswerBytes)
      return Status::malformed("the template's answer is too long");
    if (Status s = wait_readable(control_.get(), deadline, template_pid_, what); !s) return s;
    char buffer[4096];
    const ssize_t n = ::recv(control_.get(), buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::closed("the template closed its connection");
    pending_.append(buffer, static_cast<size_t>(n));
  }
  const size_t newline = pending_.find('\n');
  auto answer = nlohmann::json::parse(pending_.substr(0, newline), nullptr, false);
  pending_.erase(0, newline + 1);
  if (answer.is_discarded() || !answer.is_object()) {
    return Status::malformed("the template's answer is not a JSON object");
  }
  if (answer.contains("error")) {
    const auto& why = answer["error"];
    return Status::error(why.is_string() ? why.get<std::string>() : why.dump());
  }
  return answer;
}

std::optional<std::string> PreloadLauncher::template_request(const SpawnRequest& request) const {
  const auto& argv = request.argv;
  if (request.executable != options_.python || argv.size() < 3 || argv[1] != "-u") {
    return std::nullopt;
  }
  // The fresh workers' bootstrap (python_bootstrap.h): the template runs the same code itself.
  std::size_t at = 2;
  if (!options_.bootstrap_program.empty() && argv[at] == options_.bootstrap_program) ++at;
  if (argv.size() <= at) return std::nullopt;
  nlohmann::json r;
  size_t first_arg = at + 1;
  if (argv[at] == "-m") {
    if (argv.size() < at + 2) return std::nullopt;
    r["kind"] = "module";
    r["target"] = argv[at + 1];
    first_arg = at + 2;
  } else if (argv[at].empty() || argv[at][0] == '-') {
    return std::nullopt;  // -c, -: not a script the template can run
  } else {
    r["kind"] = "script";
    r["target"] = argv[at];
  }
  r["args"] =
      std::vector<std::string>(argv.begin() + static_cast<std::ptrdiff_t>(first_arg), argv.end());
  nlohmann::json env = nlohmann::json::object();
  for (const std::string& entry : request.envp) {
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  r["env"] = std::move(env);
  std::error_code ec;
  r["cwd"] = std::filesystem::current_path(ec).string();
  r["cpus"] = request.cpu_affinity;
  // Invalid UTF-8 in an argument or a variable: the template could not read it; start fresh.
  try {
    return r.dump() + "\n";
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

Result<SpawnedProcess> PreloadLauncher::spawn(const SpawnRequest& request) {
  std::optional<std::string> json;
  if (state_ == State::kStarting || state_ == State::kReady) json = template_request(request);
  if (json && state_ == State::kStarting) {
    if (Status ready = await_ready(); !ready)
      give_up("the template is not ready: " + ready.message());
  }
  if (json && state_ == State::kReady) {
    auto warm = fork_warm(request, *json);
    if (warm) {
      ++stats_.warm;
      return warm;
    }
    give_up(warm.error_message());
  }
  ++stats_.fresh;
  return inner_.spawn(request);
}

Result<SpawnedProcess> PreloadLauncher::fork_warm(const SpawnRequest& request,
                                                  const std::string& json) {
  UniqueFd null_in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null_in.valid()) return Status::error("cannot open /dev/null: " + errno_text());
  auto out = prepare_stream(request.stdout_target);
  if (!out) return out.status();
  auto err = prepare_stream(request.stderr_target);
  if (!err) return err.status();
  const std::vector<int> fds = {null_in.get(),
                                out->child_fd.valid() ? out->child_fd.get() : STDOUT_FILENO,
                                err->child_fd.valid() ? err->child_fd.get() : STDERR_FILENO};
  if (Status s = send_with_fds(control_.get(), json, fds); !s) return s;
  auto answer = read_answer(SteadyClock::now() + options_.fork_timeout, "a fork");
  if (!answer) return answer.status();
  const auto& named = (*answer)["pid"];
  const pid_t pid = named.is_number_integer() ? named.get<pid_t>() : -1;
  if (pid <= 1) return Status::malformed("the template's answer names no worker");
  inner_.watch_group(pid);
  SpawnedProcess spawned;
  spawned.pid = pid;
  spawned.stdout_pipe = std::move(out->parent_read);
  spawned.stderr_pipe = std::move(err->parent_read);
  spawned.executable = request.executable;
  return spawned;
}

Status PreloadLauncher::confirm_started(SpawnedProcess& process) {
  // A forked worker has no exec to confirm: it exists once the template names it.
  return process.exec_check.valid() ? inner_.confirm_started(process) : Status{};
}

void PreloadLauncher::workers_done() {
  if (state_ != State::kGone && template_pid_ > 0) {
    state_ = State::kGone;  // quietly: the job is over, nothing to warn about
    control_.reset();
    inner_.signal_group(template_pid_, SIGKILL);
  }
  inner_.workers_done();
}

int PreloadLauncher::end_all_children(Millis wait_bound) {
  control_.reset();  // the template leaves on end of file; the launcher kills what remains
  return inner_.end_all_children(wait_bound);
}

}  // namespace ddprun::agent
