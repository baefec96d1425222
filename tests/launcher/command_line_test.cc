// ddprun's flags: torchrun's names in both spellings, PET_* defaults, pass-through, errors.
#include "launcher/command_line.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>

#include "launcher/value_parsers.h"

namespace ddprun::launcher {
namespace {

// Sets an environment variable for one test and restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class CommandLineTest : public ::testing::Test {
 protected:
  // Workers run /bin/sh as "python" so that no test depends on an interpreter being present.
  ScopedEnv python_{"PYTHON_EXEC", "/bin/sh"};
  ScopedEnv omp_{"OMP_NUM_THREADS", nullptr};

  LaunchConfig parse_ok(const std::vector<std::string>& args) {
    auto parsed = parse_command_line(args);
    EXPECT_TRUE(parsed.config) << parsed.output;
    return parsed.config.value_or(LaunchConfig{});
  }
  std::string parse_error(const std::vector<std::string>& args) {
    auto parsed = parse_command_line(args);
    EXPECT_FALSE(parsed.config);
    EXPECT_EQ(parsed.exit_code, 2);
    return parsed.output;
  }
};

TEST_F(CommandLineTest, BothSpellingsOfEveryMultiWordFlag) {
  for (const char* flag : {"--nproc_per_node", "--nproc-per-node"}) {
    EXPECT_EQ(parse_ok({flag, "3", "train.py"}).agent.nproc_per_node, 3);
  }
  EXPECT_EQ(parse_ok({"--max-restarts=4", "t.py"}).job.max_restarts, 4u);
  EXPECT_EQ(parse_ok({"--max_restarts", "4", "t.py"}).job.max_restarts, 4u);
  EXPECT_EQ(parse_ok({"--master-port", "1234", "t.py"}).agent.master_port, 1234);
  EXPECT_EQ(parse_ok({"--log-dir", "/x", "t.py"}).agent.logs.log_dir, "/x");
  EXPECT_EQ(parse_ok({"--shutdown-timeout", "1.5", "t.py"}).agent.shutdown_timeout, Millis(1500));
}

TEST_F(CommandLineTest, PythonScriptRunsUnbufferedWithArgumentsUntouched) {
  auto c =
      parse_ok({"--nproc_per_node", "2", "train.py", "--lr", "1", "--nproc_per_node", "5", "-x"});
  EXPECT_EQ(c.agent.command.executable, "/bin/sh");
  EXPECT_EQ(c.agent.command.argv, (std::vector<std::string>{"/bin/sh", "-u", "train.py", "--lr",
                                                            "1", "--nproc_per_node", "5", "-x"}));
  EXPECT_EQ(c.agent.command.display_name, "train.py");
  EXPECT_EQ(c.agent.nproc_per_node, 2);
}

TEST_F(CommandLineTest, DoubleDashEndsTheFlags) {
  auto c = parse_ok({"--", "train.py", "--standalone"});
  EXPECT_EQ(c.agent.command.argv.back(), "--standalone");
  EXPECT_FALSE(c.rendezvous.standalone);
}

TEST_F(CommandLineTest, ModuleAndNoPython) {
  EXPECT_EQ(parse_ok({"-m", "pkg.train", "a"}).agent.command.argv,
            (std::vector<std::string>{"/bin/sh", "-u", "-m", "pkg.train", "a"}));
  auto c = parse_ok({"--no_python", "true", "x"});
  EXPECT_EQ(c.agent.command.argv, (std::vector<std::string>{"true", "x"}));
  EXPECT_EQ(c.agent.command.executable.substr(c.agent.command.executable.size() - 5), "/true");
  EXPECT_NE(parse_error({"--no_python", "-m", "x"}).find("--no_python"), std::string::npos);
  EXPECT_NE(parse_error({"--no_python", "no-such-program-ddprun"}).find("no-such-program-ddprun"),
            std::string::npos);
}

TEST_F(CommandLineTest, PetEnvironmentGivesDefaultsAndFlagsWin) {
  ScopedEnv nproc("PET_NPROC_PER_NODE", "4");
  ScopedEnv restarts("PET_MAX_RESTARTS", "2");
  ScopedEnv standalone("PET_STANDALONE", "1");
  auto c = parse_ok({"t.py"});
  EXPECT_EQ(c.agent.nproc_per_node, 4);
  EXPECT_EQ(c.job.max_restarts, 2u);
  EXPECT_TRUE(c.rendezvous.standalone);
  EXPECT_EQ(parse_ok({"--nproc_per_node", "1", "t.py"}).agent.nproc_per_node, 1);
}

TEST_F(CommandLineTest, Defaults) {
  auto c = parse_ok({"t.py"});
  EXPECT_EQ(c.agent.nproc_per_node, 1);
  EXPECT_EQ(c.agent.role, "default");
  EXPECT_EQ(c.job.max_restarts, 0u);
  EXPECT_EQ(c.agent.shutdown_timeout, Millis(30000));
  EXPECT_EQ(c.rendezvous.master_addr, "127.0.0.1");
  EXPECT_FALSE(c.agent.master_port);
  EXPECT_EQ(c.agent.run_id, "none");
  EXPECT_EQ(c.rendezvous.backend, RendezvousBackend::kStatic);
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_EQ(c.agent.signals_to_handle, (std::vector<int>{SIGTERM, SIGINT, SIGHUP, SIGQUIT}));
}

TEST_F(CommandLineTest, StandaloneUsesARandomRunId) {
  auto a = parse_ok({"--standalone", "t.py"});
  auto b = parse_ok({"--standalone", "t.py"});
  EXPECT_EQ(a.rendezvous.backend, RendezvousBackend::kC10d);
  EXPECT_EQ(a.agent.run_id.size(), 36u);  // a UUID
  EXPECT_NE(a.agent.run_id, b.agent.run_id);
}

TEST_F(CommandLineTest, OmpNumThreadsIsSetWithAWarningOnlyWhenUnsetAndSeveralWorkers) {
  auto c = parse_ok({"--nproc_per_node", "2", "t.py"});
  EXPECT_EQ(c.agent.extra_env.at("OMP_NUM_THREADS"), "1");
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("OMP_NUM_THREADS"), std::string::npos);
  EXPECT_FALSE(parse_ok({"t.py"}).agent.extra_env.count("OMP_NUM_THREADS"));
  ScopedEnv omp("OMP_NUM_THREADS", "4");
  EXPECT_FALSE(
      parse_ok({"--nproc_per_node", "2", "t.py"}).agent.extra_env.count("OMP_NUM_THREADS"));
}

TEST_F(CommandLineTest, RedirectsTeeAndFilter) {
  auto c = parse_ok(
      {"--nproc_per_node", "2", "-r", "3", "-t", "0:1,1:2", "--local_ranks_filter", "0,1", "t.py"});
  EXPECT_EQ(c.agent.logs.redirects.for_rank(5), 3);
  EXPECT_EQ(c.agent.logs.tee.for_rank(0), 1);
  EXPECT_EQ(c.agent.logs.tee.for_rank(1), 2);
  EXPECT_EQ(c.agent.logs.tee.for_rank(2), 0);
  EXPECT_EQ(c.agent.logs.console_ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(parse_ok({"--redirects=2", "t.py"}).agent.logs.redirects.all, 2);
}

// Issue 22: a filter naming a rank that does not exist showed nothing, silently.
TEST_F(CommandLineTest, ALocalRanksFilterOutsideTheNodesRanksIsRefused) {
  EXPECT_EQ(parse_error({"--nproc_per_node", "2", "--local_ranks_filter", "5", "t.py"}),
            "ddprun: error: --local_ranks_filter 5: there is no local rank 5 with "
            "--nproc_per_node 2 (local ranks are 0 to 1)");
  EXPECT_EQ(parse_ok({"--nproc_per_node", "2", "--local_ranks_filter", "1", "t.py"})
                .agent.logs.console_ranks,
            (std::vector<int>{1}));
}

// Issue 22: a first-heartbeat limit below the hang timeout was raised without a word.
TEST_F(CommandLineTest, AFirstHeartbeatTimeoutBelowTheHangTimeoutIsRaisedWithAWarning) {
  auto c = parse_ok({"--hang_timeout", "5", "--first_heartbeat_timeout", "3", "t.py"});
  EXPECT_EQ(c.agent.progress.first_heartbeat_timeout, Millis(5000));
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_EQ(c.warnings[0],
            "--first_heartbeat_timeout 3 is below --hang_timeout 5: a rank gets 5 s for its first "
            "heartbeat too");
  // 0 means no limit on the first heartbeat, as documented, and is kept.
  auto unlimited = parse_ok({"--hang_timeout", "5", "--first_heartbeat_timeout", "0", "t.py"});
  EXPECT_EQ(unlimited.agent.progress.first_heartbeat_timeout, Millis(0));
  EXPECT_TRUE(unlimited.warnings.empty());
}

// Issue 36: K of the job's last M failures caused here make the node leave; off by default.
TEST_F(CommandLineTest, NodeFailureLimitIsOffByDefaultAndItsWindowMustHoldIt) {
  auto defaults = parse_ok({"t.py"});
  EXPECT_EQ(defaults.agent.node_failures.limit, 0u);
  EXPECT_EQ(defaults.agent.node_failures.window, 3u);
  auto set = parse_ok({"--node-failure-limit", "2", "--node_failure_window", "5", "t.py"});
  EXPECT_EQ(set.agent.node_failures.limit, 2u);
  EXPECT_EQ(set.agent.node_failures.window, 5u);
  const std::string error = parse_error({"--node_failure_limit", "4", "t.py"});
  EXPECT_NE(error.find("--node_failure_limit 4 is more than --node_failure_window 3"),
            std::string::npos)
      << error;
  EXPECT_NE(parse_error({"--node_failure_window", "0", "t.py"}).find("node_failure_window"),
            std::string::npos);
}

TEST_F(CommandLineTest, UsageErrorsNameTheProblem) {
  EXPECT_NE(parse_error({"--bogus", "t.py"}).find("--bogus"), std::string::npos);
  EXPECT_NE(parse_error({"--nproc_per_node", "two", "t.py"}).find("--nproc_per_node=two"),
            std::string::npos);
  EXPECT_NE(parse_error({"--nproc_per_node", "0", "t.py"}).find("positive"), std::string::npos);
  EXPECT_NE(parse_error({"-r", "4", "t.py"}).find("--redirects=4"), std::string::npos);
  EXPECT_NE(parse_error({"-t", "0:x", "t.py"}).find("--tee=0:x"), std::string::npos);
  EXPECT_NE(parse_error({"--max_restarts", "x", "t.py"}).find("max_restarts"), std::string::npos);
  EXPECT_NE(parse_error({"--max_restarts", "-1", "t.py"}).find("max_restarts"), std::string::npos);
  EXPECT_NE(parse_error({"--nnodes", "3:2", "t.py"}).find("--nnodes=3:2"), std::string::npos);
  EXPECT_NE(parse_error({"--rdzv_backend", "etcd", "t.py"}).find("etcd"), std::string::npos);
  EXPECT_NE(parse_error({"--rdzv_conf", "read_timeout=soon", "t.py"}).find("read_timeout"),
            std::string::npos);
  EXPECT_NE(parse_error({"--numa-binding", "rack", "t.py"}).find("--numa-binding=rack"),
            std::string::npos);
  EXPECT_NE(parse_error({"--signals_to_handle", "SIGNOPE", "t.py"}).find("SIGNOPE"),
            std::string::npos);
  EXPECT_NE(parse_error({"--master_port", "70000", "t.py"}).find("70000"), std::string::npos);
  EXPECT_NE(parse_error({"--local_ranks_filter", "a", "t.py"}).find("local_ranks_filter"),
            std::string::npos);
  EXPECT_NE(parse_error({}).find("entry point is missing"), std::string::npos);
}

TEST_F(CommandLineTest, StaticMultiNodeNeedsAFixedSizeAndSharesAPort) {
  auto c = parse_ok({"--nnodes", "2", "--node_rank", "1", "--master_addr", "127.0.0.2", "t.py"});
  EXPECT_EQ(c.job.max_nodes, 2u);
  EXPECT_EQ(c.rendezvous.node_rank, 1);
  EXPECT_EQ(c.agent.master_port, 29500);  // nodes cannot agree on a free port without talking
  EXPECT_EQ(c.rendezvous.master_addr, "127.0.0.2");
  EXPECT_NE(parse_error({"--nnodes", "1:2", "t.py"}).find("fixed number of nodes"),
            std::string::npos);
  EXPECT_NE(parse_error({"--nnodes", "2", "--node_rank", "2", "t.py"}).find("--node_rank=2"),
            std::string::npos);
  EXPECT_NE(parse_error({"--standalone", "--nnodes", "2", "t.py"}).find("--standalone"),
            std::string::npos);
  EXPECT_EQ(parse_ok({"--nnodes", "1", "t.py"}).job.max_nodes, 1u);
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// What real callers hand torchrun (TorchX's dist.ddp, SLURM scripts, the PyTorch tutorials)
// must parse, with a warning at most.
TEST_F(CommandLineTest, RealCallersCommandLinesAreAccepted) {
  // TorchX dist.ddp: an empty role, tee 3, a c10d endpoint on port 0 of the local host.
  auto torchx =
      parse_ok({"--rdzv_backend", "c10d", "--rdzv_endpoint", "localhost:0", "--rdzv_id", "app-123",
                "--nnodes", "1", "--nproc_per_node", "2", "--tee", "3", "--role", "", "t.py"});
  EXPECT_EQ(torchx.agent.role, "");
  EXPECT_EQ(torchx.rendezvous.endpoint_port, 0);
  // Scripts that pass the etcd-era timeout and torchrun 2.x store keys.
  auto keys = parse_ok({"--rdzv_backend", "c10d", "--rdzv_endpoint", "head:29400", "--rdzv_conf",
                        "timeout=900,store_type=tcp,use_libuv=1", "t.py"});
  EXPECT_EQ(keys.job.join_timeout, Millis(900'000));
  EXPECT_TRUE(keys.warnings.empty()) << joined(keys.warnings);
  auto unknown = parse_ok({"--rdzv_conf", "bogus=1,joint_timeout=3", "t.py"});
  ASSERT_EQ(unknown.warnings.size(), 1u);  // one warning naming them all
  EXPECT_NE(unknown.warnings[0].find("bogus"), std::string::npos);
  EXPECT_NE(unknown.warnings[0].find("did you mean 'join_timeout'"), std::string::npos);
  // The PyTorch tutorials' spellings.
  auto tutorial = parse_ok({"--standalone", "--nnodes=1", "--nproc-per-node=4", "t.py", "50"});
  EXPECT_EQ(tutorial.agent.nproc_per_node, 4);
  EXPECT_EQ(tutorial.agent.command.argv.back(), "50");
}

// ddp-rendezvous replicas: every address, in order; one address parses as before.
TEST_F(CommandLineTest, SeveralRendezvousEndpointsAreReplicas) {
  auto one = parse_ok({"--rdzv_backend", "c10d", "--rdzv_endpoint", "head:29401", "t.py"});
  EXPECT_EQ(one.rendezvous.endpoint_host, "head");
  EXPECT_EQ(one.rendezvous.endpoint_port, 29401);
  EXPECT_TRUE(one.rendezvous.more_endpoints.empty());
  auto three =
      parse_ok({"--rdzv_backend", "c10d", "--rdzv_endpoint", "h1:29401,h2,[::1]:29403", "t.py"});
  EXPECT_EQ(three.rendezvous.endpoint_host, "h1");
  EXPECT_EQ(three.rendezvous.endpoint_port, 29401);
  ASSERT_EQ(three.rendezvous.more_endpoints.size(), 2u);
  EXPECT_EQ(three.rendezvous.more_endpoints[0], (rdzv::ServerAddress{"h2", 29400}));
  EXPECT_EQ(three.rendezvous.more_endpoints[1], (rdzv::ServerAddress{"::1", 29403}));
  const std::string empty =
      parse_error({"--rdzv_backend", "c10d", "--rdzv_endpoint", "h1:29401,,h2", "t.py"});
  EXPECT_NE(empty.find("h1:29401,,h2"), std::string::npos) << empty;
  EXPECT_NE(empty.find("empty address"), std::string::npos) << empty;
  const std::string hosting = parse_error(
      {"--rdzv_backend", "c10d", "--rdzv_endpoint", "h1,h2", "--rdzv_conf", "is_host=1", "t.py"});
  EXPECT_NE(hosting.find("cannot host"), std::string::npos) << hosting;
}

TEST_F(CommandLineTest, KubeflowStyleEnvironmentOnly) {
  ScopedEnv nnodes("PET_NNODES", "2");
  ScopedEnv nproc("PET_NPROC_PER_NODE", "3");
  ScopedEnv rank("PET_NODE_RANK", "1");
  ScopedEnv addr("PET_MASTER_ADDR", "127.0.0.7");
  ScopedEnv port("PET_MASTER_PORT", "23456");
  ScopedEnv restarts("PET_MAX_RESTARTS", "2");
  auto c = parse_ok({"t.py"});
  EXPECT_EQ(c.job.max_nodes, 2u);
  EXPECT_EQ(c.agent.nproc_per_node, 3);
  EXPECT_EQ(c.rendezvous.node_rank, 1);
  EXPECT_EQ(c.rendezvous.master_addr, "127.0.0.7");
  EXPECT_EQ(c.agent.master_port, 23456);
  EXPECT_EQ(c.job.max_restarts, 2u);
  ScopedEnv virtual_rank("PET_VIRTUAL_LOCAL_RANK", "1");
  EXPECT_TRUE(parse_ok({"t.py"}).agent.virtual_local_rank);
}

TEST_F(CommandLineTest, Torchrun2FlagsAndEnvironment) {
  auto c = parse_ok({"--virtual-local-rank", "--duplicate-stdout-filters", "loss,,acc,nan",
                     "--duplicate_stderr_filters", "NCCL", "--numa-binding", "exclusive",
                     "--logs-specs", "my_specs", "--event-log-handler", "console",
                     "--log-line-prefix-template", "${rank}|", "t.py"});
  EXPECT_TRUE(c.agent.virtual_local_rank);
  EXPECT_EQ(c.agent.logs.duplicate_stdout_filters, (std::vector<std::string>{"loss,acc", "nan"}));
  EXPECT_EQ(c.agent.logs.duplicate_stderr_filters, (std::vector<std::string>{"NCCL"}));
  EXPECT_EQ(c.numa_binding, agent::NumaMode::kExclusive);
  EXPECT_EQ(c.agent.logs.line_prefix_template, "${rank}|");
  const std::string warnings = joined(c.warnings);
  EXPECT_NE(warnings.find("--logs-specs my_specs has no effect"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("--event-log-handler console has no effect"), std::string::npos);
  EXPECT_TRUE(parse_ok({"--event-log-handler", "null", "t.py"}).warnings.empty());

  {
    ScopedEnv timeout("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "120");
    ScopedEnv templ("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[${role_name}:${rank}]");
    auto e = parse_ok({"t.py"});
    EXPECT_EQ(e.agent.shutdown_timeout, Millis(120'000));
    EXPECT_EQ(e.agent.logs.line_prefix_template, "[${role_name}:${rank}]");
    auto flag = parse_ok({"--shutdown-timeout", "5", "--log-line-prefix-template", "x", "t.py"});
    EXPECT_EQ(flag.agent.shutdown_timeout, Millis(5'000));  // the flag wins
    EXPECT_EQ(flag.agent.logs.line_prefix_template, "x");
  }
  ScopedEnv bad("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "soon");
  EXPECT_NE(parse_error({"t.py"}).find("TORCH_ELASTIC_SHUTDOWN_TIMEOUT=soon"), std::string::npos);
}

TEST_F(CommandLineTest, MetricsEndpointIsOffByDefaultAndLoopbackWhenOn) {
  const LaunchConfig off = parse_ok({"t.py"});
  EXPECT_FALSE(off.metrics.port);
  for (const char* flag : {"--metrics_port", "--metrics-port"}) {
    const LaunchConfig on = parse_ok({flag, "9100", "t.py"});
    EXPECT_EQ(on.metrics.port, 9100);
    EXPECT_EQ(on.metrics.address, "127.0.0.1");
  }
  EXPECT_EQ(parse_ok({"--metrics-port", "0", "--metrics-addr", "10.0.0.5", "t.py"}).metrics.address,
            "10.0.0.5");
  {
    ScopedEnv pet("PET_METRICS_PORT", "0");
    EXPECT_EQ(parse_ok({"t.py"}).metrics.port, 0);  // 0: a free port
  }
  EXPECT_NE(parse_error({"--metrics_port", "70000", "t.py"}).find("--metrics_port=70000"),
            std::string::npos);
}

TEST_F(CommandLineTest, HelpExitsZeroWithText) {
  auto parsed = parse_command_line({"--help"});
  EXPECT_FALSE(parsed.config);
  EXPECT_EQ(parsed.exit_code, 0);
  EXPECT_NE(parsed.output.find("--nproc_per_node"), std::string::npos);
}

TEST_F(CommandLineTest, VersionExitsZeroNamingTheRelease) {
  auto parsed = parse_command_line({"--version"});
  EXPECT_FALSE(parsed.config);
  EXPECT_EQ(parsed.exit_code, 0);
  EXPECT_EQ(parsed.output.rfind("ddprun ", 0), 0u) << parsed.output;
}

// --nproc_per_node's keywords over fabricated device trees: nproc_per_node_test.cc.

TEST(ValueParsers, Nnodes) {
  EXPECT_EQ(parse_nnodes("4").value().min, 4);
  EXPECT_EQ(parse_nnodes("1:3").value().max, 3);
  for (const char* bad : {"0", "", "a", "2:1", "1:2:3", "-1"})
    EXPECT_FALSE(parse_nnodes(bad)) << bad;
}

}  // namespace
}  // namespace ddprun::launcher
