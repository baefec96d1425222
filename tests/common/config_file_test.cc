// The YAML settings loader: values with their place in the file, and every kind of bad file
// refused with file:line:column and the key.
#include "common/config_file.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace ddprun {
namespace {

class ConfigFileTest : public ::testing::Test {
 protected:
  ddprun::testing::TempDir temp_;  // tests/support
  void SetUp() override { dir_ = temp_.path(); }
  std::string file(const std::string& text) {
    const std::string path = dir_ + "/job.yaml";
    std::ofstream(path) << text;
    return path;
  }
  Result<std::vector<ConfigValue>> load(const std::string& text) {
    return load_config_file(file(text), schema_);
  }
  std::string error(const std::string& text) {
    auto r = load(text);
    EXPECT_FALSE(r.ok());
    EXPECT_TRUE(r.status().is_invalid_argument());
    return r.error_message();
  }

  std::string dir_;
  std::vector<ConfigKey> schema_ = {
      {"max_restarts", ConfigType::kInteger, in_range(0, 100)},
      {"shutdown_timeout", ConfigType::kNumber, in_range(0, 1e9)},
      {"standalone", ConfigType::kBool, {}},
      {"role", ConfigType::kString, {}},
      {"nproc_per_node", ConfigType::kScalar, {}},
      {"signals", ConfigType::kList, {}},
      {"rdzv_conf", ConfigType::kMap, {}},
      {"start_method", ConfigType::kString, one_of({"spawn", "fork"})},
  };
};

TEST_F(ConfigFileTest, ReadsEveryTypeWithItsPlace) {
  auto values = load(
      "max_restarts: 3\n"
      "shutdown_timeout: 1.5\n"
      "standalone: yes\n"
      "role: trainer\n"
      "nproc_per_node: gpu\n"
      "signals: [SIGTERM, SIGUSR1]\n"
      "rdzv_conf:\n"
      "  join_timeout: 900\n"
      "  is_host: false\n");
  ASSERT_TRUE(values.ok()) << values.error_message();
  ASSERT_EQ(values->size(), 7u);
  EXPECT_EQ((*values)[0].text, "3");
  EXPECT_EQ((*values)[0].where, dir_ + "/job.yaml:1:15");
  EXPECT_EQ((*values)[2].text, "true");  // YAML's yes, as the flag's spelling
  EXPECT_EQ((*values)[5].list, (std::vector<std::string>{"SIGTERM", "SIGUSR1"}));
  EXPECT_EQ((*values)[6].map, (std::vector<std::pair<std::string, std::string>>{
                                  {"join_timeout", "900"}, {"is_host", "false"}}));
  EXPECT_EQ(load("signals: SIGTERM\n")->front().list, std::vector<std::string>{"SIGTERM"});
  EXPECT_TRUE(load("").value().empty());  // an empty file sets nothing
}

TEST_F(ConfigFileTest, UnknownKeysSuggestTheNearestOne) {
  const std::string e = error("role: a\nmax_restart: 3\n");
  EXPECT_NE(e.find("job.yaml:2:1: unknown key 'max_restart' (did you mean 'max_restarts'?)"),
            std::string::npos)
      << e;
  EXPECT_NE(error("frobnicate: 1\n").find("unknown key 'frobnicate'"), std::string::npos);
}

TEST_F(ConfigFileTest, WrongTypesRangesChoicesAndRepeatsNameTheKeyAndPlace) {
  std::string e = error("max_restarts: three\n");
  EXPECT_NE(e.find("job.yaml:1:15: key 'max_restarts': 'three' is not a whole number"),
            std::string::npos)
      << e;
  e = error("max_restarts: 1000\n");
  EXPECT_NE(e.find("key 'max_restarts': 1000 is out of range [0, 100]"), std::string::npos) << e;
  e = error("standalone: maybe\n");
  EXPECT_NE(e.find("key 'standalone': 'maybe' is not true or false"), std::string::npos) << e;
  e = error("role: [a, b]\n");
  EXPECT_NE(e.find("key 'role': expected a string, got a list"), std::string::npos) << e;
  e = error("rdzv_conf: 5\n");
  EXPECT_NE(e.find("key 'rdzv_conf': expected a mapping"), std::string::npos) << e;
  e = error("start_method: frok\n");
  EXPECT_NE(e.find("'frok' is not one of: spawn, fork (did you mean 'fork'?)"), std::string::npos)
      << e;
  e = error("role: a\nrole: b\n");
  EXPECT_NE(e.find("job.yaml:2:1: key 'role' given twice"), std::string::npos) << e;
}

TEST_F(ConfigFileTest, BrokenFilesAreClearErrorsNotExceptions) {
  std::string e = error("role: [unclosed\n");
  EXPECT_NE(e.find("job.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("not valid YAML"), std::string::npos) << e;
  e = error("- just\n- a list\n");
  EXPECT_NE(e.find("expected a mapping of settings"), std::string::npos) << e;
  auto missing = load_config_file(dir_ + "/nope.yaml", schema_);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error_message().find("nope.yaml: cannot read the config file"),
            std::string::npos);
}

}  // namespace
}  // namespace ddprun
