// Fatal-signal reports in a forked child: the message and the faulting thread's backtrace on
// stderr and in the error file, then death by the same signal; a SIGABRT sent by another
// process (a launcher's hang report) shows where the process was blocked.
#include "worker_sdk/src/fatal_signals.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.h"
#include "tests/support/text_file.h"

namespace {

namespace fs = std::filesystem;

[[gnu::noinline]] void segfault_in_unit_test(volatile int* where) { *where = 1; }

[[gnu::noinline]] void block_in_read_for_test(int ready_fd, int never_fd) {
  char byte = 'r';
  (void)!::write(ready_fd, &byte, 1);
  (void)!::read(never_fd, &byte, 1);  // nobody ever writes: blocked until the signal
}

struct Child {
  ddprun::testing::TempDir temp;  // tests/support: removed with the Child
  fs::path dir = temp.path();
  pid_t pid = -1;
  fs::path err() const { return dir / "stderr"; }
  fs::path error_file() const { return dir / "error.json"; }
};

// Forks a child that redirects stderr to a file, installs the handlers and runs `body`.
template <class Body>
Child start_child(Body body) {
  Child c;
  c.pid = ::fork();
  if (c.pid == 0) {
    std::FILE* err = std::freopen(c.err().c_str(), "w", stderr);
    if (err == nullptr) ::_exit(3);
    ddp::detail::FatalSignalConfig config;
    config.error_file = c.error_file().string();
    ddp::detail::install_fatal_signal_handlers(config);
    body();
    ::_exit(0);
  }
  return c;
}

// Waits (at most 30 s: a pidfd to poll, no sleep) and returns the wait status.
int wait_child(pid_t pid) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 30000) != 1) ::kill(pid, SIGKILL);
  ::close(fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(FatalSignalsTest, SegfaultIsReportedWithItsBacktraceAndKillsWithTheSameSignal) {
  Child c = start_child([] {
    volatile int* null_pointer = nullptr;
    segfault_in_unit_test(null_pointer);
  });
  const int status = wait_child(c.pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGSEGV);
  const std::string err = ddprun::testing::read_text_file(c.err());
  EXPECT_NE(err.find("SIGSEGV: Segmentation fault (fatal signal 11, address 0x0"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("#0 "), std::string::npos) << err;
  EXPECT_NE(err.find("segfault_in_unit_test"), std::string::npos) << err;
  auto doc = nlohmann::json::parse(std::ifstream(c.error_file()));
  const std::string message = doc["message"]["message"];
  EXPECT_EQ(message.rfind("SIGSEGV: Segmentation fault", 0), 0u) << message;
  EXPECT_NE(message.find("segfault_in_unit_test"), std::string::npos) << message;
  EXPECT_NE(std::string(doc["message"]["extraInfo"]["py_callstack"]).find("segfault_in_unit_test"),
            std::string::npos);
}

TEST(FatalSignalsTest, SigabrtFromAnotherProcessShowsWhereTheProcessWasBlocked) {
  int ready[2], never[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(never), 0);
  Child c = start_child([&] { block_in_read_for_test(ready[1], never[0]); });
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);  // the child is in block_in_read_for_test
  ::kill(c.pid, SIGABRT);
  const int status = wait_child(c.pid);
  for (int fd : {ready[0], ready[1], never[0], never[1]}) ::close(fd);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGABRT);
  const std::string err = ddprun::testing::read_text_file(c.err());
  EXPECT_NE(err.find("SIGABRT: Aborted (fatal signal 6, sent by pid " + std::to_string(::getpid())),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("block_in_read_for_test"), std::string::npos) << err;
}

void own_handler(int) {}

TEST(FatalSignalsTest, ASignalTheProgramAlreadyHandlesIsLeftAlone) {
  struct sigaction mine {
  }, previous{};
  mine.sa_handler = own_handler;
  ASSERT_EQ(::sigaction(SIGBUS, &mine, &previous), 0);
  ddp::detail::FatalSignalConfig config;
  config.signals = {SIGBUS, SIGFPE};
  const auto handled = ddp::detail::install_fatal_signal_handlers(config);
  EXPECT_EQ(std::count(handled.begin(), handled.end(), SIGBUS), 0);
  EXPECT_EQ(std::count(handled.begin(), handled.end(), SIGFPE), 1);
  struct sigaction now {};
  ::sigaction(SIGBUS, nullptr, &now);
  EXPECT_EQ(now.sa_handler, own_handler);
  ddp::detail::uninstall_fatal_signal_handlers();
  ::sigaction(SIGBUS, &previous, nullptr);
}

}  // namespace
