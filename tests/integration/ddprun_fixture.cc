#include "tests/integration/ddprun_fixture.h"

#include <cstdlib>

#include <sys/stat.h>

#include <sstream>

#include "tests/integration/proc_watch.h"
#include "tests/integration/test_python.h"

namespace ddprun::testing {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

std::string RunResult::describe() const {
  std::ostringstream s;
  if (exit) {
    s << *exit;
  } else {
    s << "still running at the deadline";
  }
  s << "\n--- ddprun stdout ---\n" << out << "\n--- ddprun stderr ---\n" << err;
  return s.str();
}

::testing::AssertionResult ExitedWith(const RunResult& run, int code) {
  if (run.exit && run.exit->signal == 0 && run.exit->code == code) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "expected exit code " << code << ", got " << run.describe();
}

std::string DdprunTest::ddprun_binary() { return DDPRUN_BINARY; }

std::string DdprunTest::worker(const std::string& name) {
  return std::string(DDPRUN_SOURCE_DIR) + "/tests/integration/workers/" + name;
}

std::string DdprunTest::python() { return test_python(); }

void DdprunTest::SetUp() {
  become_child_subreaper();
  out_dir_ = temp_ / "out";
  ::mkdir(out_dir_.c_str(), 0755);
  const std::string tmp = temp_ / "tmp";
  ::mkdir(tmp.c_str(), 0755);
  for (const auto& [key, value] : current_environment()) {
    if (starts_with(key, "PET_") || starts_with(key, "TORCHELASTIC_") ||
        starts_with(key, "PYTHON") || key == "OMP_NUM_THREADS" || key == "DDPRUN_LOG_LEVEL" ||
        // A test run inside a SLURM job or a systemd unit must not configure ddprun from it.
        starts_with(key, "SLURM") || key == "NOTIFY_SOCKET" || starts_with(key, "WATCHDOG_")) {
      continue;
    }
    env_[key] = value;
  }
  // DDPRUN_TEST_LOG_LEVEL=debug: the programs under test log at that level (for a failure).
  if (const char* level = std::getenv("DDPRUN_TEST_LOG_LEVEL"); level && *level) {
    env_["DDPRUN_LOG_LEVEL"] = level;
  }
  env_["TMPDIR"] = tmp;
  env_["PYTHON_EXEC"] = python();
  env_["DDPRUN_TEST_OUT"] = out_dir_;
  env_["PYTHONDONTWRITEBYTECODE"] = "1";
}

void DdprunTest::TearDown() {
  // Every ChildProcess of the test is gone by now: any child left is an orphan of ddprun.
  const AdoptedChildren left = kill_adopted_children();
  EXPECT_TRUE(left.alive.empty()) << left.alive.size()
                                  << " process(es) started by ddprun outlived it, e.g. pid "
                                  << (left.alive.empty() ? 0 : left.alive.front());
}

std::unique_ptr<ChildProcess> DdprunTest::start_ddprun(const std::vector<std::string>& args) {
  ChildOptions options;
  options.executable = ddprun_binary();
  options.args = args;
  options.env = env_;
  options.cwd = temp_.path();
  auto child = ChildProcess::start(options);
  if (!child) {
    ADD_FAILURE() << "starting ddprun: " << child.error_message();
    return nullptr;
  }
  return std::move(child.value());
}

RunResult DdprunTest::finish(ChildProcess& child, Deadline deadline) {
  RunResult run;
  run.pid = child.pid();
  run.exit = child.wait(deadline);
  run.out = child.stdout_text();
  run.err = child.stderr_text();
  return run;
}

RunResult DdprunTest::run_ddprun(const std::vector<std::string>& args,
                                 std::chrono::milliseconds timeout) {
  auto child = start_ddprun(args);
  if (!child) return {};
  return finish(*child, deadline_after(timeout));
}

}  // namespace ddprun::testing
