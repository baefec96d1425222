// The flag table (common/flag_table.h): one declaration gives the command line, the environment
// defaults, the config file's keys and the checks, with torchrun's precedence.
#include "common/flag_table.h"

#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

struct ToolFlags {
  std::string mode;
  int workers = 0;
  std::optional<int> port;
  double grace = 0;
  bool verbose = false;
  std::vector<std::string> tags;
  std::string filters;
  std::string options;
};

const FlagTable<ToolFlags>& tool_table() {
  using F = ToolFlags;
  using T = ConfigType;
  static const FlagTable<ToolFlags> table(
      {.underscores = true, .env_prefix = "FTT_"},
      {
          {{.name = "run_mode",
            .help = "How to run",
            .default_text = "fast",
            .check = one_of({"fast", "slow"})},
           &F::mode},
          {{.name = "workers",
            .type = T::kInteger,
            .help = "Workers",
            .default_text = "2",
            .check = in_range(1, 64),
            .short_name = "-w"},
           &F::workers},
          {{.name = "port", .type = T::kInteger, .check = in_range(0, 65535)}, &F::port},
          {{.name = "grace",
            .type = T::kNumber,
            .default_text = "30",
            .check = in_range(0, 1e9),
            .fallback_env = "FTT_LEGACY_GRACE"},
           &F::grace},
          {{.name = "verbose", .type = T::kBool}, &F::verbose},
          {{.name = "tag", .scope = FlagScope::kCommandLineOnly}, &F::tags},
          {{.name = "filters", .type = T::kList, .commas_doubled = true}, &F::filters},
          {{.name = "options",
            .type = T::kMap,
            .check =
                [](const std::string& text) {
                  return text.find("bad") == std::string::npos
                             ? Status{}
                             : Status::invalid_argument("'" + text + "' holds bad");
                }},
           &F::options},
          {{.name = "script", .scope = FlagScope::kFileOnly}},
      });
  return table;
}

class FlagTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name :
         {"FTT_RUN_MODE", "FTT_WORKERS", "FTT_PORT", "FTT_GRACE", "FTT_LEGACY_GRACE"}) {
      ::unsetenv(name);
    }
  }
  void TearDown() override { SetUp(); }

  // Declares, applies `file_text` (when given) and parses `args`; the first error, if any.
  Status parse(std::vector<std::string> args, const std::string& file_text = "") {
    app_ = std::make_unique<CLI::App>();
    flags_ = ToolFlags{};
    if (Status s = tool_table().declare(*app_, flags_); !s) return s;
    if (!file_text.empty()) {
      const std::string path = dir_ / "tool.yaml";
      std::ofstream(path) << file_text;
      auto settings = tool_table().catalog().apply_config_file(path, *app_);
      if (!settings) return settings.status();
      settings_ = *settings;
    }
    try {
      std::vector<std::string> reversed(args.rbegin(), args.rend());
      app_->parse(reversed);
    } catch (const CLI::ParseError& e) {
      return Status::invalid_argument(e.what());
    }
    return tool_table().catalog().check_parsed(*app_);
  }

  ddprun::testing::TempDir dir_;
  std::unique_ptr<CLI::App> app_;
  ToolFlags flags_;
  ConfigFileSettings settings_;
};

TEST_F(FlagTableTest, DefaultsComeFromTheTable) {
  ASSERT_TRUE(parse({}));
  EXPECT_EQ(flags_.mode, "fast");
  EXPECT_EQ(flags_.workers, 2);
  EXPECT_FALSE(flags_.port);
  EXPECT_EQ(flags_.grace, 30);
  EXPECT_FALSE(flags_.verbose);
}

TEST_F(FlagTableTest, EverySpellingAndTheShortName) {
  ASSERT_TRUE(parse({"--run_mode", "slow", "-w", "4", "--verbose", "--port", "0"}));
  EXPECT_EQ(flags_.mode, "slow");
  EXPECT_EQ(flags_.workers, 4);
  EXPECT_EQ(flags_.port, 0);
  EXPECT_TRUE(flags_.verbose);
  ASSERT_TRUE(parse({"--run-mode", "slow", "--workers", "3", "--workers", "5"}));
  EXPECT_EQ(flags_.workers, 5);  // the last one wins
}

TEST_F(FlagTableTest, PrecedenceCommandLineThenEnvironmentThenFileThenFallbackThenDefault) {
  ::setenv("FTT_LEGACY_GRACE", "7", 1);
  ASSERT_TRUE(parse({}));
  EXPECT_EQ(flags_.grace, 7);
  ASSERT_TRUE(parse({}, "grace: 8\n"));
  EXPECT_EQ(flags_.grace, 8);
  ::setenv("FTT_GRACE", "9", 1);
  ASSERT_TRUE(parse({}, "grace: 8\n"));
  EXPECT_EQ(flags_.grace, 9);
  ASSERT_TRUE(parse({"--grace", "10"}, "grace: 8\n"));
  EXPECT_EQ(flags_.grace, 10);
}

TEST_F(FlagTableTest, OneCheckForEverySourceNamingWhereTheValueCameFrom) {
  Status s = parse({"--workers", "65"});
  EXPECT_EQ(s.message(), "--workers=65: 65 is out of range [1, 64]");
  ::setenv("FTT_RUN_MODE", "medium", 1);
  s = parse({});
  EXPECT_EQ(s.message(), "--run_mode=medium: 'medium' is not one of: fast, slow");
  ::unsetenv("FTT_RUN_MODE");
  s = parse({}, "workers: 2\nport: 70000\n");
  EXPECT_NE(s.message().find("tool.yaml:2:7: key 'port': 70000 is out of range"), std::string::npos)
      << s.message();
  ::setenv("FTT_LEGACY_GRACE", "soon", 1);
  s = parse({});
  EXPECT_EQ(s.message(), "FTT_LEGACY_GRACE=soon: 'soon' is not a number");
}

TEST_F(FlagTableTest, ListsAndMapsFromTheFileAreSpelledAsTheFlagReadsThem) {
  ASSERT_TRUE(parse({}, "filters: [a, 'b,c']\noptions: {x: 1, y: two}\n"));
  EXPECT_EQ(flags_.filters, "a,b,,c");
  EXPECT_EQ(flags_.options, "x=1,y=two");
  const Status s = parse({}, "options: {x: bad}\n");
  EXPECT_NE(s.message().find("key 'options': 'x=bad' holds bad"), std::string::npos) << s.message();
}

TEST_F(FlagTableTest, FileOnlyKeysAreHandedBackAndCommandLineOnlyFlagsRepeat) {
  ASSERT_TRUE(parse({"--tag", "a", "--tag", "b"}, "script: train.py\nworkers: 3\n"));
  EXPECT_EQ(flags_.tags, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(settings_.file_only.size(), 1u);
  EXPECT_EQ(settings_.file_only[0].text, "train.py");
  EXPECT_EQ(settings_.keys, (std::set<std::string>{"script", "workers"}));
  const Status s = parse({}, "tag: a\n");
  EXPECT_NE(s.message().find("unknown key 'tag'"), std::string::npos) << s.message();
}

TEST_F(FlagTableTest, SchemaEnvironmentNamesAndHelp) {
  const FlagCatalog& catalog = tool_table().catalog();
  std::vector<std::string> keys;
  for (const ConfigKey& key : catalog.config_schema()) keys.push_back(key.name);
  EXPECT_EQ(keys, (std::vector<std::string>{"run_mode", "workers", "port", "grace", "verbose",
                                            "filters", "options", "script"}));
  EXPECT_EQ(catalog.option_names(catalog.flags()[1]), "-w,--workers");
  EXPECT_EQ(catalog.option_names(catalog.flags()[0]), "--run_mode,--run-mode");
  EXPECT_EQ(catalog.env_name(catalog.flags()[0]), "FTT_RUN_MODE");
  ASSERT_TRUE(parse({}));
  const std::string help = app_->help();
  EXPECT_NE(help.find("How to run"), std::string::npos) << help;
  EXPECT_NE(help.find("FTT_WORKERS"), std::string::npos) << help;
}

TEST_F(FlagTableTest, FindsTheConfigPathPastFlagsThatTakeValues) {
  const FlagCatalog& catalog = tool_table().catalog();
  // Without knowing that --run_mode takes a value, "slow" would look like the program's name.
  EXPECT_EQ(catalog.find_config_path({"--run_mode", "slow", "--config", "a.yaml", "x.py"}, true),
            "a.yaml");
  EXPECT_EQ(catalog.find_config_path({"--verbose", "--config", "b.yaml", "script.py"}, true),
            "b.yaml");
  // After the program's name everything is the program's.
  EXPECT_EQ(catalog.find_config_path({"script.py", "--config", "c.yaml"}, true), "");
  EXPECT_EQ(catalog.find_config_path({"--bogus", "--config", "d.yaml"}, false), "d.yaml");
}

}  // namespace
}  // namespace ddprun
