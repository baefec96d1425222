// ddprun --config: the file's settings under the command line and PET_* variables, its entry
// point and environment, errors that name the place, and every example file in configs/.
#include "launcher/job_config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "launcher/command_line.h"
#include "tests/agent/fake_device_tree.h"
#include "tests/support/temp_dir.h"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

class JobConfigTest : public ::testing::Test {
 protected:
  ddprun::testing::TempDir temp_;  // tests/support
  void SetUp() override {
    ::setenv("PYTHON_EXEC", "/bin/sh", 1);  // no test depends on an interpreter
    ::unsetenv("OMP_NUM_THREADS");
    ::unsetenv("PET_MAX_RESTARTS");
    dir_ = temp_.path();
  }
  void TearDown() override { ::unsetenv("PET_MAX_RESTARTS"); }
  std::string file(const std::string& text) {
    const std::string path = dir_ + "/job.yaml";
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(JobConfigTest, FileSettingsSitBelowPetVariablesAndTheCommandLine) {
  const std::string path = file(
      "max_restarts: 3\n"
      "nproc_per_node: 2\n"
      "rdzv_conf: {join_timeout: 900}\n"
      "duplicate_stdout_filters: [\"loss,acc\", nan]\n"
      "training_script: train.py\n"
      "training_script_args: [--lr, \"0.1\"]\n"
      "env: {OMP_NUM_THREADS: \"4\", MY_FLAG: on}\n");
  auto from_file = parse_command_line({"--config", path});
  ASSERT_TRUE(from_file.config) << from_file.output;
  const LaunchConfig& c = *from_file.config;
  EXPECT_EQ(c.job.max_restarts, 3u);
  EXPECT_EQ(c.agent.nproc_per_node, 2);
  EXPECT_EQ(c.job.join_timeout, Millis(900'000));
  EXPECT_EQ(c.agent.logs.duplicate_stdout_filters, (std::vector<std::string>{"loss,acc", "nan"}));
  EXPECT_EQ(c.agent.command.argv,
            (std::vector<std::string>{"/bin/sh", "-u", "train.py", "--lr", "0.1"}));
  EXPECT_EQ(c.agent.extra_env.at("OMP_NUM_THREADS"), "4");  // not overridden by the default 1
  EXPECT_EQ(c.agent.extra_env.at("MY_FLAG"), "on");

  ::setenv("PET_MAX_RESTARTS", "5", 1);
  auto pet = parse_command_line({"--config", path});
  ASSERT_TRUE(pet.config) << pet.output;
  EXPECT_EQ(pet.config->job.max_restarts, 5u);  // PET_* over the file
  auto flag = parse_command_line({"--config", path, "--max_restarts", "7", "other.py", "x"});
  ASSERT_TRUE(flag.config) << flag.output;
  EXPECT_EQ(flag.config->job.max_restarts, 7u);  // the command line over both
  EXPECT_EQ(flag.config->agent.command.argv,
            (std::vector<std::string>{"/bin/sh", "-u", "other.py", "x"}));  // its script wins
}

TEST_F(JobConfigTest, NodeFailureKeys) {
  auto parsed = parse_command_line(
      {"--config", file("node_failure_limit: 2\nnode_failure_window: 4\n"), "t.py"});
  ASSERT_TRUE(parsed.config) << parsed.output;
  EXPECT_EQ(parsed.config->agent.node_failures.limit, 2u);
  EXPECT_EQ(parsed.config->agent.node_failures.window, 4u);
}

TEST_F(JobConfigTest, MetricsKeys) {
  auto parsed = parse_command_line(
      {"--config", file("metrics_port: 9100\nmetrics_addr: 127.0.0.2\n"), "t.py"});
  ASSERT_TRUE(parsed.config) << parsed.output;
  EXPECT_EQ(parsed.config->metrics.port, 9100);
  EXPECT_EQ(parsed.config->metrics.address, "127.0.0.2");
  auto flag = parse_command_line(
      {"--config", file("metrics_port: 9100\n"), "--metrics_port", "9200", "t.py"});
  ASSERT_TRUE(flag.config) << flag.output;
  EXPECT_EQ(flag.config->metrics.port, 9200);
}

TEST_F(JobConfigTest, BadFilesAreRefusedNamingThePlaceAndKey) {
  auto expect_error = [&](const std::string& text, const std::string& wanted) {
    auto parsed = parse_command_line({"--config", file(text), "t.py"});
    EXPECT_FALSE(parsed.config);
    EXPECT_EQ(parsed.exit_code, 2);
    EXPECT_NE(parsed.output.find(wanted), std::string::npos) << parsed.output;
  };
  expect_error("nproc_per_nod: 2\n",
               "job.yaml:1:1: unknown key 'nproc_per_nod' (did you mean "
               "'nproc_per_node'?)");
  expect_error("max_restarts: -1\n", "job.yaml:1:15: key 'max_restarts': -1 is out of range");
  expect_error("standalone: 2\n", "key 'standalone': '2' is not true or false");
  expect_error("nnodes: \"3:2\"\n", "job.yaml:1:9: key 'nnodes': --nnodes=3:2");
  expect_error("rdzv_conf: {read_timeout: soon}\n",
               "key 'rdzv_conf': --rdzv_conf: key 'read_timeout'");
  expect_error("signals_to_handle: [SIGTERM, SIGNOPE]\n", "key 'signals_to_handle'");
  expect_error("master_port: 70000\n", "key 'master_port': 70000 is out of range");
  expect_error("metrics_port: 70000\n", "key 'metrics_port': 70000 is out of range");
  expect_error("metrics_prot: 9100\n", "did you mean 'metrics_port'?");
  auto missing = parse_command_line({"--config", file("max_restarts: 1\n")});
  EXPECT_FALSE(missing.config);
  EXPECT_NE(missing.output.find("give training_script in"), std::string::npos) << missing.output;
  auto unreadable = parse_command_line({"--config", dir_ + "/none.yaml", "t.py"});
  EXPECT_NE(unreadable.output.find("none.yaml: cannot read the config file"), std::string::npos);
}

// Every job file in configs/ (the daemon's are checked by the daemon's test).
TEST_F(JobConfigTest, EveryExampleJobFileInConfigsLoads) {
  // The examples are for GPU machines: a node with two NVIDIA GPUs (DDPRUN_DEVICE_ROOT).
  ddprun::testing::FakeDeviceTree gpus(dir_ + "/node");
  gpus.add_nvidia_gpu("0000:1b:00.0", "GPU-1");
  gpus.add_nvidia_gpu("0000:1c:00.0", "GPU-2");
  ::setenv("DDPRUN_DEVICE_ROOT", gpus.root().c_str(), 1);
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  int checked = 0;
  for (const auto& entry : fs::recursive_directory_iterator(DDPRUN_SOURCE_DIR "/configs")) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".yaml" || name.rfind("daemon", 0) == 0) continue;
    auto parsed = parse_command_line({"--config", entry.path().string()});
    EXPECT_TRUE(parsed.config) << entry.path() << ": " << parsed.output;
    ++checked;
  }
  ::unsetenv("DDPRUN_DEVICE_ROOT");
  EXPECT_GE(checked, 3);
}

}  // namespace
}  // namespace ddprun::launcher
