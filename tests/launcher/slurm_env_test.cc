// ddprun under SLURM: reading a step's environment (pure), which settings SLURM supplies, and
// the whole command line with SLURM as the layer between the config file and the defaults.
#include "launcher/slurm_env.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "launcher/command_line.h"
#include "tests/support/temp_dir.h"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

// Two nodes, this one the second, as srun sets it (the variables ddprun reads, and some noise).
agent::EnvMap two_node_step() {
  return {{"SLURM_JOB_ID", "4242"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_NODEID", "1"},
          {"SLURM_NNODES", "2"},
          {"SLURM_JOB_NODELIST", "gpu[07-08]"},
          {"SLURMD_NODENAME", "gpu08"},
          {"SLURM_GPUS_ON_NODE", "8"},
          {"SLURM_NTASKS_PER_NODE", "1"},
          {"SLURM_PROCID", "1"},
          {"PATH", "/bin"}};
}

SlurmStep read_ok(const agent::EnvMap& env) {
  auto step = read_slurm_step(env);
  EXPECT_TRUE(step) << step.error_message();
  EXPECT_TRUE(step && step->has_value());
  return step && *step ? **step : SlurmStep{};
}

std::string read_error(const agent::EnvMap& env) {
  auto step = read_slurm_step(env);
  EXPECT_FALSE(step);
  EXPECT_TRUE(step.status().is_invalid_argument());
  return step.error_message();
}

TEST(SlurmStep, ReadsTheStepFromSrunsEnvironment) {
  const SlurmStep s = read_ok(two_node_step());
  EXPECT_EQ(s.job_id, "4242");
  EXPECT_EQ(s.step_id, "0");
  EXPECT_EQ(s.nnodes, 2);
  EXPECT_EQ(s.node_id, 1);
  EXPECT_EQ(s.first_host, "gpu07");
  EXPECT_EQ(s.node_name, "gpu08");
  EXPECT_EQ(s.rdzv_port, 29400);
  EXPECT_EQ(s.workers, 8);
  EXPECT_EQ(s.workers_from, "SLURM_GPUS_ON_NODE");
}

TEST(SlurmStep, TheStepsOwnNodesWinOverTheAllocations) {
  auto env = two_node_step();
  env["SLURM_NNODES"] = "4";  // the allocation; the step runs on two of its nodes
  env["SLURM_JOB_NODELIST"] = "gpu[01-04]";
  env["SLURM_STEP_NUM_NODES"] = "2";
  env["SLURM_STEP_NODELIST"] = "gpu[03-04]";
  const SlurmStep s = read_ok(env);
  EXPECT_EQ(s.nnodes, 2);
  EXPECT_EQ(s.first_host, "gpu03");
  EXPECT_EQ(s.nodelist_from, "SLURM_STEP_NODELIST");
}

TEST(SlurmStep, WorkersFromTasksWithoutGpusAndReservedPort) {
  auto env = two_node_step();
  env.erase("SLURM_GPUS_ON_NODE");
  env["SLURM_NTASKS_PER_NODE"] = "4";
  env["SLURM_STEP_RESV_PORTS"] = "12000-12003";
  SlurmStep s = read_ok(env);
  EXPECT_EQ(s.workers, 4);
  EXPECT_EQ(s.workers_from, "SLURM_NTASKS_PER_NODE");
  EXPECT_EQ(s.rdzv_port, 12000);
  env["SLURM_GPUS_ON_NODE"] = "0";  // no GPUs on this node: tasks it is
  EXPECT_EQ(read_ok(env).workers, 4);
  env.erase("SLURM_NTASKS_PER_NODE");
  EXPECT_FALSE(read_ok(env).workers);  // SLURM does not say: the default stays
}

TEST(SlurmStep, NotUnderSrunMeansNothingFromSlurm) {
  for (const char* missing : {"SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_NODEID"}) {
    auto env = two_node_step();
    env.erase(missing);
    auto step = read_slurm_step(env);
    ASSERT_TRUE(step) << missing;
    EXPECT_FALSE(step->has_value()) << missing;
  }
  // The batch script's own step (and extern, interactive): ddprun run straight from sbatch.
  for (const char* special : {"4294967291", "4294967292", "4294967294", "batch", "extern"}) {
    auto env = two_node_step();
    env["SLURM_STEP_ID"] = special;
    auto step = read_slurm_step(env);
    ASSERT_TRUE(step) << special;
    EXPECT_FALSE(step->has_value()) << special;
  }
  auto old_name = two_node_step();
  old_name.erase("SLURM_STEP_ID");
  old_name["SLURM_STEPID"] = "3";  // the old spelling
  EXPECT_EQ(read_ok(old_name).step_id, "3");
}

TEST(SlurmStep, InconsistentVariablesAreErrorsNamingThem) {
  auto env = two_node_step();
  env["SLURM_NODEID"] = "2";
  EXPECT_NE(read_error(env).find("SLURM_NODEID=2 is not a node of the step"), std::string::npos);
  env = two_node_step();
  env["SLURM_NNODES"] = "two";
  EXPECT_NE(read_error(env).find("SLURM_NNODES=two is not a count"), std::string::npos);
  env = two_node_step();
  env["SLURM_JOB_NODELIST"] = "gpu[07-08";
  EXPECT_NE(read_error(env).find("SLURM_JOB_NODELIST=gpu[07-08 is unusable"), std::string::npos);
  env = two_node_step();
  env["SLURM_JOB_NODELIST"] = "gpu[01-03]";
  EXPECT_NE(read_error(env).find("names 3 hosts, but SLURM_NNODES=2"), std::string::npos);
  env = two_node_step();
  env.erase("SLURM_JOB_NODELIST");
  EXPECT_NE(read_error(env).find("node list"), std::string::npos);
  env = two_node_step();
  env["SLURM_GPUS_ON_NODE"] = "-1";
  EXPECT_NE(read_error(env).find("SLURM_GPUS_ON_NODE=-1"), std::string::npos);
  env = two_node_step();
  env["SLURM_STEP_RESV_PORTS"] = "70000-70001";
  EXPECT_NE(read_error(env).find("SLURM_STEP_RESV_PORTS"), std::string::npos);
  env = two_node_step();
  env["SLURM_STEP_NUM_TASKS"] = "16";  // srun started 8 ddprun per node
  env["SLURM_STEP_NUM_NODES"] = "2";
  env["SLURM_STEP_NODELIST"] = "gpu[07-08]";
  EXPECT_NE(read_error(env).find("16 tasks on 2 nodes"), std::string::npos);
}

GivenSettings nothing_given() {
  GivenSettings g;
  g.given = [](const std::string&) { return false; };
  g.signals_to_handle = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  return g;
}

std::map<std::string, std::string> as_map(const std::vector<SlurmSetting>& settings) {
  std::map<std::string, std::string> out;
  for (const auto& s : settings) out[s.key] = s.value;
  return out;
}

TEST(SlurmSettings, EverythingFromSlurmWhenNothingIsGiven) {
  const auto settings = slurm_settings(read_ok(two_node_step()), nothing_given());
  const std::map<std::string, std::string> expected{
      {"nnodes", "2"},
      {"node_rank", "1"},
      {"rdzv_backend", "c10d"},
      {"rdzv_endpoint", "gpu07:29400"},
      {"rdzv_id", "slurm-4242.0"},
      {"local_addr", "gpu08"},
      {"nproc_per_node", "8"},
      {"signals_to_forward", "SIGUSR1,SIGUSR2"},
  };
  EXPECT_EQ(as_map(settings), expected);
  const std::string line = describe_slurm(read_ok(two_node_step()), settings);
  EXPECT_NE(line.find("SLURM job 4242 step 0, node 1 of 2 (gpu08): took --nnodes 2 "
                      "(SLURM_NNODES)"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("--nproc_per_node 8 (SLURM_GPUS_ON_NODE)"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);  // one line
}

TEST(SlurmSettings, GivenSettingsWinAndAUserRendezvousKeepsItsShape) {
  GivenSettings given = nothing_given();
  given.given = [](const std::string& key) { return key == "rdzv_endpoint" || key == "nnodes"; };
  auto settings = as_map(slurm_settings(read_ok(two_node_step()), given));
  EXPECT_EQ(settings.count("rdzv_endpoint"), 0u);
  EXPECT_EQ(settings.count("nnodes"), 0u);
  EXPECT_EQ(settings.at("rdzv_id"), "slurm-4242.0");

  given = nothing_given();
  given.user_rendezvous = true;  // --standalone or --rdzv_backend static
  settings = as_map(slurm_settings(read_ok(two_node_step()), given));
  EXPECT_EQ(settings, (std::map<std::string, std::string>{
                          {"nproc_per_node", "8"}, {"signals_to_forward", "SIGUSR1,SIGUSR2"}}));

  given = nothing_given();
  given.signals_to_handle = {SIGTERM, SIGUSR1};  // the user ends the job on SIGUSR1
  EXPECT_EQ(as_map(slurm_settings(read_ok(two_node_step()), given)).at("signals_to_forward"),
            "SIGUSR2");
  given.signals_to_handle = {SIGUSR1, SIGUSR2};
  EXPECT_EQ(as_map(slurm_settings(read_ok(two_node_step()), given)).count("signals_to_forward"),
            0u);
}

// The whole command line in a faked srun environment (the process's own, restored after).
class SlurmCommandLineTest : public ::testing::Test {
 protected:
  ddprun::testing::TempDir temp_;  // tests/support
  void SetUp() override {
    set("PYTHON_EXEC", "/bin/sh");  // no test depends on an interpreter
    set("OMP_NUM_THREADS", nullptr);
    for (const auto& [key, value] : two_node_step()) {
      if (key != "PATH") set(key.c_str(), value.c_str());
    }
    dir_ = temp_.path();
  }
  void TearDown() override {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        ::unsetenv(it->first.c_str());
      }
    }
  }
  void set(const char* key, const char* value) {
    const char* old = std::getenv(key);
    saved_.emplace_back(key, old ? std::optional<std::string>(old) : std::nullopt);
    if (value) {
      ::setenv(key, value, 1);
    } else {
      ::unsetenv(key);
    }
  }
  LaunchConfig parse_ok(const std::vector<std::string>& args) {
    auto parsed = parse_command_line(args);
    EXPECT_TRUE(parsed.config) << parsed.output;
    return parsed.config.value_or(LaunchConfig{});
  }
  std::string file(const std::string& text) {
    const std::string path = dir_ + "/job.yaml";
    std::ofstream(path) << text;
    return path;
  }

  std::string dir_;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(SlurmCommandLineTest, NoRendezvousFlagsConfiguresTheJobFromSlurm) {
  const LaunchConfig c = parse_ok({"train.py"});
  EXPECT_EQ(c.rendezvous.backend, RendezvousBackend::kC10d);
  EXPECT_EQ(c.rendezvous.endpoint_host, "gpu07");
  EXPECT_EQ(c.rendezvous.endpoint_port, 29400);
  EXPECT_EQ(c.rendezvous.job_id, "slurm-4242.0");
  EXPECT_EQ(c.rendezvous.node_rank, 1);
  EXPECT_EQ(c.rendezvous.local_addr, "gpu08");
  EXPECT_EQ(c.job.min_nodes, 2u);
  EXPECT_EQ(c.job.max_nodes, 2u);
  EXPECT_EQ(c.agent.nproc_per_node, 8);
  EXPECT_EQ(c.agent.run_id, "slurm-4242.0");
  EXPECT_EQ(c.agent.hostname, "gpu08");
  EXPECT_EQ(c.signals_to_forward, (std::vector<int>{SIGUSR1, SIGUSR2}));
  ASSERT_EQ(c.notes.size(), 1u);  // exactly one line about SLURM
  EXPECT_NE(c.notes[0].find("SLURM job 4242 step 0, node 1 of 2"), std::string::npos);
}

TEST_F(SlurmCommandLineTest, PrecedenceCommandLineThenPetThenFileThenSlurm) {
  const std::string path = file(
      "nproc_per_node: 3\n"
      "rdzv_id: from-file\n"
      "max_restarts: 2\n"
      "training_script: train.py\n");
  LaunchConfig c = parse_ok({"--config", path});
  EXPECT_EQ(c.agent.nproc_per_node, 3);  // the file over SLURM
  EXPECT_EQ(c.rendezvous.job_id, "from-file");
  EXPECT_EQ(c.rendezvous.endpoint_host, "gpu07");  // SLURM where the file says nothing
  EXPECT_EQ(c.job.max_restarts, 2u);
  EXPECT_EQ(c.notes.at(0).find("--nproc_per_node"), std::string::npos) << c.notes[0];

  set("PET_NPROC_PER_NODE", "5");
  set("PET_RDZV_ENDPOINT", "head:1234");
  c = parse_ok({"--config", path});
  EXPECT_EQ(c.agent.nproc_per_node, 5);           // PET_* over the file
  EXPECT_EQ(c.rendezvous.endpoint_host, "head");  // and over SLURM
  EXPECT_EQ(c.rendezvous.endpoint_port, 1234);
  EXPECT_EQ(c.job.max_nodes, 2u);  // the rest still from SLURM

  c = parse_ok({"--config", path, "--nproc_per_node", "6", "--rdzv_id", "cli", "--nnodes", "1:3",
                "--node_rank", "0"});
  EXPECT_EQ(c.agent.nproc_per_node, 6);  // the command line over everything
  EXPECT_EQ(c.rendezvous.job_id, "cli");
  EXPECT_EQ(c.job.min_nodes, 1u);
  EXPECT_EQ(c.job.max_nodes, 3u);
  EXPECT_EQ(c.rendezvous.node_rank, 0);
}

TEST_F(SlurmCommandLineTest, StandaloneOrStaticKeepsTheUsersShape) {
  LaunchConfig c = parse_ok({"--standalone", "train.py"});
  EXPECT_TRUE(c.rendezvous.standalone);
  EXPECT_EQ(c.job.max_nodes, 1u);
  EXPECT_EQ(c.agent.nproc_per_node, 8);  // still the node's GPUs
  c = parse_ok({"--rdzv_backend", "static", "--nnodes", "2", "--node_rank", "0", "train.py"});
  EXPECT_EQ(c.rendezvous.backend, RendezvousBackend::kStatic);
  EXPECT_EQ(c.rendezvous.node_rank, 0);
  EXPECT_EQ(c.rendezvous.local_addr, "");
}

TEST_F(SlurmCommandLineTest, BadSlurmVariablesAreAUsageErrorNamingThem) {
  set("SLURM_NODEID", "9");
  auto parsed = parse_command_line({"train.py"});
  ASSERT_FALSE(parsed.config);
  EXPECT_EQ(parsed.exit_code, 2);
  EXPECT_NE(parsed.output.find("SLURM_NODEID=9"), std::string::npos) << parsed.output;
}

TEST_F(SlurmCommandLineTest, SignalsToForwardFlagAndItsConflicts) {
  LaunchConfig c = parse_ok({"--signals_to_forward", "SIGUSR2", "train.py"});
  EXPECT_EQ(c.signals_to_forward, (std::vector<int>{SIGUSR2}));
  c = parse_ok({"--signals_to_forward", "", "train.py"});  // off, even under SLURM
  EXPECT_TRUE(c.signals_to_forward.empty());
  c = parse_ok({"--signals_to_handle", "SIGTERM,SIGUSR1", "train.py"});
  EXPECT_EQ(c.signals_to_forward, (std::vector<int>{SIGUSR2}));  // SLURM's default gives way
  auto both = parse_command_line(
      {"--signals_to_handle", "SIGTERM,SIGUSR1", "--signals_to_forward", "USR1", "train.py"});
  ASSERT_FALSE(both.config);
  EXPECT_NE(both.output.find("SIGUSR1 is in both"), std::string::npos) << both.output;
  auto bad = parse_command_line({"--signals_to_forward", "SIGNOPE", "train.py"});
  ASSERT_FALSE(bad.config);
  EXPECT_NE(bad.output.find("--signals_to_forward: 'SIGNOPE'"), std::string::npos) << bad.output;
  c = parse_ok({"--config", file("signals_to_forward: [SIGUSR1]\ntraining_script: t.py\n")});
  EXPECT_EQ(c.signals_to_forward, (std::vector<int>{SIGUSR1}));
}

TEST(SlurmOff, OutsideSlurmNothingChangesAndNothingIsForwarded) {
  for (const char* key : {"SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEPID", "SLURM_NODEID"}) {
    ASSERT_EQ(std::getenv(key), nullptr) << key << " is set: run the tests outside SLURM";
  }
  ::setenv("PYTHON_EXEC", "/bin/sh", 1);
  auto parsed = parse_command_line({"train.py"});
  ASSERT_TRUE(parsed.config) << parsed.output;
  EXPECT_EQ(parsed.config->rendezvous.backend, RendezvousBackend::kStatic);
  EXPECT_TRUE(parsed.config->signals_to_forward.empty());
  EXPECT_TRUE(parsed.config->notes.empty());
}

}  // namespace
}  // namespace ddprun::launcher
