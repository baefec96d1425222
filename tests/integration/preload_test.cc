// --preload (issue 24): workers forked from a warm template interpreter are indistinguishable
// from workers started as `python -u script`, and supervision does not change. Runs once per
// torch (test_python.h).
//
// PreloadConformanceTest runs the same probe (workers/preload_probe.py) four times: a script
// and a `-m` module, each as fresh processes and forked from the template, 2 ranks each, then
// compares what the workers saw, one property per test; the two a fork cannot hide (the
// template's command line, torch already imported) show that the warm runs really forked. The other
// tests run real jobs with
// --preload: restarts, torch's error files, hang detection, logs, a template that fails to
// import, one that starts a thread, one that dies mid-job, and an agent SIGKILLed (the
// fixture's teardown fails if any process is left).
#include <csignal>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/integration/ddprun_fixture.h"
#include "tests/integration/proc_watch.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr char kForked[] = "workers are forked from the template";

// Runs ddprun jobs outside any one test (the suite's shared probes).
class SuiteRunner : public DdprunTest {
 public:
  void TestBody() override {}
  void open() { SetUp(); }
  void close() { TearDown(); }
  RunResult run(const std::vector<std::string>& args) { return run_ddprun(args, 90s); }
  std::string out_file(const std::string& name) const { return out(name); }
  std::string cwd() const { return temp().path(); }
  static std::string worker_path(const std::string& name) { return worker(name); }
  static std::string python_path() { return python(); }
};

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in, nullptr, false);
}

class PreloadConformanceTest : public ::testing::Test {
 protected:
  struct Probes {
    // [mode][rank]: mode 0 fresh script, 1 warm script, 2 fresh module, 3 warm module; 4 and 5
    // the script and the module run as plain `python -u` (--no_python: no bootstrap at all).
    json probe[6][2];
    std::string warm_log[2];
  };

  static void SetUpTestSuite() {
    probes_ = new Probes;
    SuiteRunner runner;
    runner.open();
    // The probe as a module of the working directory, for `-m`.
    std::filesystem::copy_file(SuiteRunner::worker_path("preload_probe.py"),
                               runner.cwd() + "/preload_probe.py");
    const std::vector<std::vector<std::string>> entry = {
        {SuiteRunner::worker_path("preload_probe.py")}, {"-m", "preload_probe"}};
    for (int mode = 0; mode < 4; ++mode) {
      const bool warm = mode % 2 == 1;
      std::vector<std::string> args = {"--nproc_per_node", "2", "--hang_timeout", "60"};
      if (warm) args.insert(args.end(), {"--preload", "torch"});
      for (const auto& e : entry[mode / 2]) args.push_back(e);
      args.push_back("m" + std::to_string(mode));
      const RunResult run = runner.run(args);
      EXPECT_TRUE(ExitedWith(run, 0)) << run.err;
      if (warm) probes_->warm_log[mode / 2] = run.err;
      for (int rank = 0; rank < 2; ++rank) {
        probes_->probe[mode][rank] = read_json(runner.out_file(
            "probe_m" + std::to_string(mode) + "_" + std::to_string(rank) + ".json"));
      }
    }
    run_plain(runner, entry[0], 4);
    run_plain(runner, entry[1], 5);
    runner.close();
  }
  static void run_plain(SuiteRunner& runner, const std::vector<std::string>& entry, int mode) {
    std::vector<std::string> args = {
        "--nproc_per_node",         "2", "--hang_timeout", "60", "--no_python",
        SuiteRunner::python_path(), "-u"};
    args.insert(args.end(), entry.begin(), entry.end());
    args.push_back("m" + std::to_string(mode));
    const RunResult run = runner.run(args);
    EXPECT_TRUE(ExitedWith(run, 0)) << run.err;
    for (int rank = 0; rank < 2; ++rank) {
      probes_->probe[mode][rank] = read_json(
          runner.out_file("probe_m" + std::to_string(mode) + "_" + std::to_string(rank) + ".json"));
    }
  }
  static void TearDownTestSuite() {
    delete probes_;
    probes_ = nullptr;
  }

  // Checks that `key` is the same for fresh and warm workers, script and module, both ranks.
  static void expect_same(const std::string& key) {
    for (int kind = 0; kind < 2; ++kind) {
      for (int rank = 0; rank < 2; ++rank) {
        const json& fresh = probes_->probe[2 * kind][rank];
        const json& warm = probes_->probe[2 * kind + 1][rank];
        ASSERT_TRUE(fresh.is_object() && warm.is_object()) << "a probe wrote nothing";
        EXPECT_EQ(fresh[key], warm[key])
            << key << " differs (" << (kind ? "-m module" : "script") << ", rank " << rank << ")";
      }
    }
  }
  static const json& warm(int kind, int rank) { return probes_->probe[2 * kind + 1][rank]; }

  static Probes* probes_;
};

PreloadConformanceTest::Probes* PreloadConformanceTest::probes_ = nullptr;

// Issue 34: a fresh worker runs its script through ddprun's bootstrap (automatic progress, the
// exception notice, quick exit); it sees what the same script run as plain `python -u` sees.
TEST_F(PreloadConformanceTest, FreshWorkersSeeWhatPlainPythonSees) {
  for (int kind = 0; kind < 2; ++kind) {
    for (int rank = 0; rank < 2; ++rank) {
      const json& fresh = probes_->probe[2 * kind][rank];
      const json& plain = probes_->probe[4 + kind][rank];
      ASSERT_TRUE(fresh.is_object() && plain.is_object()) << "a probe wrote nothing";
      for (const char* key : {"path0",
                              "main_name",
                              "main_file",
                              "main_spec",
                              "main_cached",
                              "main_package",
                              "unbuffered",
                              "flags",
                              "cwd",
                              "umask",
                              "rlimits",
                              "signals",
                              "signal_mask",
                              "stdin",
                              "fds",
                              "pgid_is_pid",
                              "same_session_as_parent",
                              "parent",
                              "pdeathsig",
                              "task_threads",
                              "python_threads",
                              "faulthandler",
                              "torch_threads",
                              "cuda_initialized"}) {
        EXPECT_EQ(fresh[key], plain[key])
            << key << " differs (" << (kind ? "-m module" : "script") << ", rank " << rank << ")";
      }
      EXPECT_EQ(fresh["argv"].size(), plain["argv"].size());
      EXPECT_EQ(fresh["argv"][0], plain["argv"][0]);
    }
  }
}

// What the agent says is not enough: a --preload that silently started fresh processes would
// log the same. The workers themselves show it (docs/preload.md, "What remains different"):
// a fork has the template's command line and torch imported before its script ran.
TEST_F(PreloadConformanceTest, TheWarmRunsReallyForkedFromTheTemplate) {
  for (const std::string& log : probes_->warm_log) {
    EXPECT_NE(log.find(kForked), std::string::npos) << log;
    EXPECT_EQ(log.find("fresh processes"), std::string::npos) << log;
  }
  for (int kind = 0; kind < 2; ++kind) {
    for (int rank = 0; rank < 2; ++rank) {
      const json& fresh = probes_->probe[2 * kind][rank];
      ASSERT_TRUE(fresh.is_object() && warm(kind, rank).is_object()) << "a probe wrote nothing";
      EXPECT_EQ(warm(kind, rank)["cmdline_is_the_templates"], true)
          << "not a fork of the template (" << (kind ? "-m module" : "script") << ", rank " << rank
          << ")";
      EXPECT_EQ(warm(kind, rank)["torch_imported_before_the_script"], true) << "rank " << rank;
      EXPECT_EQ(fresh["cmdline_is_the_templates"], false) << "rank " << rank;
      EXPECT_EQ(fresh["torch_imported_before_the_script"], false) << "rank " << rank;
    }
  }
}

TEST_F(PreloadConformanceTest, SysArgvAsGivenAndSysPathZero) {
  for (int kind = 0; kind < 2; ++kind) {
    for (int rank = 0; rank < 2; ++rank) {
      EXPECT_EQ(probes_->probe[2 * kind][rank]["argv"][0], warm(kind, rank)["argv"][0]);
      EXPECT_EQ(probes_->probe[2 * kind][rank]["argv"].size(), warm(kind, rank)["argv"].size());
    }
  }
  expect_same("path0");
}

TEST_F(PreloadConformanceTest, MainModuleFileSpecAndPackage) {
  for (const char* key : {"main_name", "main_file", "main_spec", "main_cached", "main_package"}) {
    expect_same(key);
  }
}

TEST_F(PreloadConformanceTest, UnbufferedStandardStreams) { expect_same("unbuffered"); }

TEST_F(PreloadConformanceTest, InterpreterFlags) { expect_same("flags"); }

TEST_F(PreloadConformanceTest, EnvironmentInPythonAndInTheCLibrary) {
  expect_same("environ");
  for (int kind = 0; kind < 2; ++kind) {
    for (int rank = 0; rank < 2; ++rank) EXPECT_TRUE(warm(kind, rank)["c_environ_matches"]);
  }
  // Each rank its own: RANK differs, and getenv sees it (c_environ_matches).
  EXPECT_EQ(warm(0, 0)["environ"]["RANK"], "0");
  EXPECT_EQ(warm(0, 1)["environ"]["RANK"], "1");
}

TEST_F(PreloadConformanceTest, WorkingDirectoryUmaskAndResourceLimits) {
  expect_same("cwd");
  expect_same("umask");
  expect_same("rlimits");
}

TEST_F(PreloadConformanceTest, SignalDispositionsAndMask) {
  expect_same("signals");
  expect_same("signal_mask");
}

TEST_F(PreloadConformanceTest, StdinAndNoOtherDescriptors) {
  expect_same("stdin");
  expect_same("fds");
  EXPECT_EQ(warm(0, 0)["fds"], json::array({0, 1, 2}));
}

TEST_F(PreloadConformanceTest, ProcessGroupParentAndParentDeathSignal) {
  for (const char* key : {"pgid_is_pid", "same_session_as_parent", "parent", "pdeathsig"}) {
    expect_same(key);
  }
  EXPECT_EQ(warm(0, 0)["parent"], "ddprun");  // the agent, not the template
  EXPECT_EQ(warm(0, 0)["pdeathsig"], SIGKILL);
}

TEST_F(PreloadConformanceTest, NoThreadAndNoCudaContext) {
  for (const char* key : {"task_threads", "python_threads", "cuda_initialized"}) expect_same(key);
  EXPECT_EQ(warm(0, 0)["task_threads"], 1);
}

TEST_F(PreloadConformanceTest, FaulthandlerForHangDetection) { expect_same("faulthandler"); }

TEST_F(PreloadConformanceTest, TorchThreadsAsAFreshProcess) { expect_same("torch_threads"); }

// Fresh processes seed random, numpy and torch from the OS, so two ranks never share a state;
// forked ones would all continue the template's.
TEST_F(PreloadConformanceTest, EachWorkerHasItsOwnRandomState) {
  for (int kind = 0; kind < 2; ++kind) {
    for (const char* key : {"random", "numpy_random", "torch_initial_seed", "torch_rand"}) {
      if (warm(kind, 0)[key].is_null()) continue;  // numpy not installed
      EXPECT_NE(warm(kind, 0)[key], warm(kind, 1)[key]) << key << " is shared by the ranks";
    }
  }
}

class PreloadTest : public DdprunTest {
 protected:
  RunResult run_preloaded(std::vector<std::string> args, std::chrono::milliseconds timeout = 90s) {
    args.insert(args.begin(), {"--preload", "torch"});
    return run_ddprun(args, timeout);
  }
};

// A worker failure restarts the group from the same template: torch trains again.
TEST_F(PreloadTest, ARestartedGroupIsForkedAgainAndAllReduces) {
  const RunResult run =
      run_preloaded({"--nproc_per_node", "2", "--max_restarts", "1", worker("torch_restart.py")});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_NE(run.err.find(kForked), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("fresh processes"), std::string::npos) << run.err;
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (int rank = 0; rank < 2; ++rank) {
      const std::string id = std::to_string(rank) + "_" + std::to_string(attempt);
      EXPECT_EQ(read_text_file(out("allreduce_" + id)), "3.0 2");
      EXPECT_EQ(read_text_file(out("started_" + id)), "forked") << "rank " << id;
    }
  }
}

TEST_F(PreloadTest, TorchsRecordedErrorFileIsTheRootCause) {
  const RunResult run = run_preloaded({"--nproc_per_node", "2", worker("torch_record.py")});
  ASSERT_TRUE(ExitedWith(run, 1));
  const std::string root = run.err.substr(std::min(run.err.size(), run.err.find("Root Cause")));
  EXPECT_NE(root.find("rank      : 1"), std::string::npos) << run.err;
  EXPECT_NE(root.find("rank 1 found a bad batch"), std::string::npos) << run.err;
}

// The hung rank's faulthandler stack comes from the forked worker, with its own frame.
TEST_F(PreloadTest, AHungRankIsNamedWithItsFrame) {
  const RunResult run = run_preloaded({"--standalone", "--nproc_per_node", "2", "--hang_timeout",
                                       "2", worker("torch_hang.py"), "1", "3", "after", "barrier"});
  ASSERT_TRUE(ExitedWith(run, 128 + SIGABRT)) << run.err;
  const std::string root = run.err.substr(std::min(run.err.size(), run.err.find("Root Cause")));
  EXPECT_NE(root.find("local_rank 1) hung: no progress for"), std::string::npos) << run.err;
  EXPECT_NE(root.find("in stuck_in_step at torch_hang.py:"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("local_rank 0) hung"), std::string::npos) << run.err;
}

TEST_F(PreloadTest, OutputIsTeedWithEachRanksPrefix) {
  const RunResult run =
      run_preloaded({"--nproc_per_node", "2", "--tee", "3", worker("preload_helpers.py"), "hello"});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_NE(run.out.find("[default0]:hello from 0 (forked)"), std::string::npos)
      << run.out << run.err;
  EXPECT_NE(run.out.find("[default1]:hello from 1 (forked)"), std::string::npos)
      << run.out << run.err;
}

TEST_F(PreloadTest, AModuleThatCannotBeImportedLeavesTheJobToFreshProcesses) {
  const RunResult run = run_ddprun({"--preload", "no_such_module_for_ddprun", "--nproc_per_node",
                                    "2", worker("preload_helpers.py"), "hello"});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_NE(run.err.find("importing no_such_module_for_ddprun failed: ModuleNotFoundError"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("the workers start as fresh processes"), std::string::npos) << run.err;
  EXPECT_NE(run.out.find("hello from 0 (fresh)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("hello from 1 (fresh)"), std::string::npos) << run.out;
}

// A template with a thread cannot fork safely: the module that started it is named.
TEST_F(PreloadTest, AModuleThatStartsAThreadIsRefusedByName) {
  write_text_file(temp().path() + "/starts_a_thread.py",
                  "import threading, time\n"
                  "threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n");
  env_["PYTHONPATH"] = temp().path();
  const RunResult run = run_ddprun({"--preload", "starts_a_thread", "--nproc_per_node", "2",
                                    worker("preload_helpers.py"), "hello"});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_NE(run.err.find("importing starts_a_thread started a thread"), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("fresh processes"), std::string::npos) << run.err;
  EXPECT_NE(run.out.find("hello from 0 (fresh)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("hello from 1 (fresh)"), std::string::npos) << run.out;
}

// The template SIGKILLed in the middle of a job: the next attempt's workers start fresh, and
// the job finishes.
TEST_F(PreloadTest, ATemplateThatDiesLeavesLaterAttemptsToFreshProcesses) {
  const RunResult run = run_preloaded({"--nproc_per_node", "2", "--max_restarts", "1",
                                       worker("preload_helpers.py"), "kill_template"});
  ASSERT_TRUE(ExitedWith(run, 0));
  // The agent learns it from the template's exit or from its socket, whichever comes first.
  EXPECT_TRUE(run.err.find("the template was killed by SIGKILL") != std::string::npos ||
              run.err.find("sending to the template: Broken pipe") != std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("workers start as fresh processes"), std::string::npos) << run.err;
  EXPECT_EQ(read_text_file(out("started_0")), "forked");  // attempt 0, from the template
  EXPECT_EQ(read_text_file(out("started_1")), "forked");
  EXPECT_EQ(read_text_file(out("after_0_1")), "fresh");
  EXPECT_EQ(read_text_file(out("after_1_1")), "fresh");
}

// ddprun SIGKILLed while warm workers run: the workers and the template go with it (the
// fixture's teardown fails the test if any process is left).
TEST_F(PreloadTest, NothingOutlivesAKilledAgent) {
  auto ddprun = start_ddprun(
      {"--preload", "torch", "--nproc_per_node", "2", worker("preload_helpers.py"), "sleep"});
  ASSERT_NE(ddprun, nullptr);
  ASSERT_TRUE(wait_for_files({out("running_0"), out("running_1")}, deadline_after(60s)))
      << ddprun->stderr_text();
  ASSERT_NE(ddprun->stderr_text().find(kForked), std::string::npos) << ddprun->stderr_text();
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) {
    pids.push_back(std::stoi(read_text_file(out("running_" + std::to_string(rank)))));
    // Forks of the template keep its command line (docs/preload.md): the warm workers whose
    // fate this test is about, not fresh ones.
    EXPECT_NE(
        read_text_file("/proc/" + std::to_string(pids.back()) + "/cmdline").find("/template.py"),
        std::string::npos)
        << "rank " << rank << " was not forked from the template";
  }
  ddprun->send_signal(SIGKILL);
  const RunResult run = finish(*ddprun, deadline_after(10s));
  ASSERT_TRUE(run.exit.has_value());
  // Bounded only against a survivor: they die at once (parent-death signals, the sentinel).
  const Deadline bound = deadline_after(10s);
  for (pid_t pid : pids) {
    EXPECT_TRUE(wait_for_process_exit(pid, bound)) << "worker " << pid << " outlived ddprun";
  }
  // The template and the sentinel, re-parented to this test (a subreaper), end too.
  for (pid_t pid : children_of(::getpid())) {
    EXPECT_TRUE(wait_for_process_exit(pid, bound))
        << "pid " << pid << ", started by ddprun, did not end after ddprun was killed";
  }
}

}  // namespace
}  // namespace ddprun::testing
