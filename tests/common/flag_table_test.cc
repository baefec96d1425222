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
  std::string config;
  std::string mode;
  int workers = 0;
  std::optional<int> port;
  double grace = 0;
  bool verbose = false;
  std::vector<std::string> tags;
  std::string filters;
  std::string options;
  int level = 0;
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
          {{.name = "verbosity_level", .type = T::kInteger}, &F::level},
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
          {{.name = "config", .scope = FlagScope::kConfigPath}, &F::config},
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
                                            "verbosity_level", "filters", "options", "script"}));
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

// The whole parse (FlagTable::parse) with the program's command after the flags.
class FlagTableParseTest : public FlagTableTest {
 protected:
  Result<ParsedFlags> parse_all(const std::vector<std::string>& args) {
    app_ = std::make_unique<CLI::App>();
    flags_ = ToolFlags{};
    return tool_table().parse(*app_, flags_, args, {.prefix_command = true});
  }
};

// argparse (torchrun) accepts an unambiguous prefix of a long flag: so does the table.
TEST_F(FlagTableParseTest, AnUnambiguousPrefixIsTheFlag) {
  auto parsed = parse_all({"--run_mo", "slow", "--work=5", "--verbose", "x.py", "--run_m", "y"});
  ASSERT_TRUE(parsed.ok()) << parsed.error_message();
  EXPECT_EQ(flags_.mode, "slow");
  EXPECT_EQ(flags_.workers, 5);
  EXPECT_TRUE(flags_.verbose);  // exact, though also a prefix of --verbosity_level
  // The program's arguments are never touched.
  EXPECT_EQ(parsed->remaining, (std::vector<std::string>{"x.py", "--run_m", "y"}));
  // Both spellings of one setting are one candidate; '-' and '_' alike.
  ASSERT_TRUE(parse_all({"--run-mo", "slow", "x.py"}).ok());
  EXPECT_EQ(flags_.mode, "slow");
  // A value that looks like a flag is a value.
  ASSERT_TRUE(parse_all({"--options", "--po", "x.py"}).ok());
  EXPECT_EQ(flags_.options, "--po");
}

TEST_F(FlagTableParseTest, AnAmbiguousPrefixListsTheCandidates) {
  auto parsed = parse_all({"--verb", "x.py"});
  ASSERT_FALSE(parsed.ok());
  EXPECT_TRUE(parsed.status().is_invalid_argument());
  EXPECT_EQ(parsed.error_message(),
            "ambiguous option: --verb could match --verbose, --verbosity_level");
}

TEST_F(FlagTableParseTest, AnUnknownFlagGetsADidYouMean) {
  auto parsed = parse_all({"--workres", "3", "x.py"});
  ASSERT_FALSE(parsed.ok());
  EXPECT_TRUE(parsed.status().is_invalid_argument());
  EXPECT_NE(parsed.error_message().find("unrecognized argument: --workres (did you mean "
                                        "'--workers'?)"),
            std::string::npos)
      << parsed.error_message();
  // After the program's name nothing is checked.
  EXPECT_TRUE(parse_all({"x.py", "--workres", "3"}).ok());
  EXPECT_TRUE(parse_all({"--", "--workres", "3"}).ok());
}

TEST_F(FlagTableParseTest, TheConfigFlagIsAnEntry) {
  const std::string path = dir_ / "tool.yaml";
  std::ofstream(path) << "workers: 7\nrun_mode: slow\n";
  auto parsed = parse_all({"--conf", path, "--run_mode", "fast", "x.py"});
  ASSERT_TRUE(parsed.ok()) << parsed.error_message();
  EXPECT_EQ(parsed->config_path, path);
  EXPECT_EQ(flags_.workers, 7);
  EXPECT_EQ(flags_.mode, "fast");  // the command line wins
  EXPECT_TRUE(parsed->from_file.keys.count("workers"));
}

TEST_F(FlagTableParseTest, HelpIsOutputNotAnError) {
  auto parsed = parse_all({"--hel"});
  ASSERT_TRUE(parsed.ok()) << parsed.error_message();
  ASSERT_TRUE(parsed->output);
  EXPECT_NE(parsed->output->find("--run-mode"), std::string::npos);
}

// A check wrapping a parser that names the flag itself: nothing is added in front (decided by
// the entry, not by reading the message).
TEST(FlagCheckTest, ACheckThatNamesItsFlagIsNotPrefixedAgain) {
  struct Two {
    std::string a;
    std::string b;
  };
  auto fails = [](std::string message) {
    return [message](const std::string&) { return Status::invalid_argument(message); };
  };
  const FlagTable<Two> table(
      {.underscores = false},
      {{{.name = "alpha", .check = fails("--alpha is wrong here"), .check_names_flag = true},
        &Two::a},
       {{.name = "beta", .check = fails("--looks like a flag")}, &Two::b}});
  Two values;
  CLI::App app;
  auto alpha = table.parse(app, values, {"--alpha", "x"}, {});
  ASSERT_FALSE(alpha.ok());
  EXPECT_EQ(alpha.error_message(), "--alpha is wrong here");
  CLI::App app2;
  auto beta = table.parse(app2, values, {"--beta", "y"}, {});
  ASSERT_FALSE(beta.ok());
  EXPECT_EQ(beta.error_message(), "--beta=y: --looks like a flag");
}

}  // namespace
}  // namespace ddprun
