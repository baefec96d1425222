// One declaration per setting of a program (ddprun, ddp-rendezvous): its name and spellings,
// environment variable, YAML key, type, default, help and check, from which the command line
// (CLI11 options), the environment defaults, the config file's schema and the checks are all
// made. Adding a setting is one entry in the program's table, plus its use.
//
//   const FlagTable<MyFlags>& table = ...;  // {FlagInfo{...}, &MyFlags::member} entries
//   CLI::App app;
//   MyFlags flags;
//   auto parsed = table.parse(app, flags, args, {});  // the whole parse, below
//
// FlagTable::parse is: declare (options, defaults, PET_* names), abbreviations expanded (an
// unambiguous prefix of a long flag, as torchrun's argparse accepts; an unknown flag gets a
// "did you mean"), the --config file applied (its values become defaults), the command line
// parsed, and every check run whatever gave the value.
//
// Precedence, as torchrun's: command line > environment (FlagSpelling::env_prefix) > config
// file > fallback variable (FlagInfo::fallback_env) > FlagInfo::default_text.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/config_file.h"
#include "common/result.h"

namespace ddprun {

// How a program spells its flags: always --name-with-dashes.
struct FlagSpelling {
  bool underscores = false;  // also --name_with_underscores (torchrun's spelling)
  std::string env_prefix;    // "PET_": PET_NAME gives a default; empty: no variables
};

// Where a setting may be given.
enum class FlagScope {
  kEverywhere,       // command line, environment and config file
  kCommandLineOnly,  // a repeatable flag with no single YAML value (ddp-rendezvous --job-token)
  kFileOnly,         // a config-file key with no flag (training_script, env); handed back
  kConfigPath,       // --config: the file whose values become the other settings' defaults
};

// A check of a value's text, from any source. Its message names the value, not the flag: the
// table adds "--name=value: " or "file:line:column: key 'name': " in front, unless the entry
// says (FlagInfo::check_names_flag) that the parser it wraps names the flag itself
// ("--nnodes=3:2 is invalid: ...").
using FlagCheck = std::function<Status(const std::string& text)>;

// Everything about one setting except where its value goes.
struct FlagInfo {
  std::string name{};  // with underscores: the YAML key; the flags replace '_' by '-' too
  ConfigType type = ConfigType::kString;  // kBool: a flag without a value
  std::string help{};
  std::string default_text{};     // empty: the value's own empty state (empty, false, unset)
  FlagCheck check{};              // optional
  bool check_names_flag = false;  // check's messages begin with the flag: nothing is added
  std::string short_name{};       // "-m"
  std::string fallback_env{};     // a variable giving the default below the file (torchrun's own)
  bool commas_doubled = false;    // a kList whose items may hold commas, written ",," on the line
  FlagScope scope = FlagScope::kEverywhere;
};

// Declares one option on `app` for `info`, bound to a value inside `flags` (type-erased).
template <class Flags>
using FlagBinder =
    std::function<CLI::Option*(CLI::App& app, Flags& flags, const std::string& names)>;

// One entry of a table: a setting and the member its value goes to.
template <class Flags>
struct Flag {
  FlagInfo info;
  FlagBinder<Flags> bind;  // empty for FlagScope::kFileOnly

  Flag(FlagInfo i) : info(std::move(i)) {}  // NOLINT: file-only keys are written bare
  template <class T>
  Flag(FlagInfo i, T Flags::*member) : info(std::move(i)), bind(binder(member)) {}

  // A setting of a part with its own table (ddp-rendezvous's security settings), whose value
  // goes to that part's member of `Flags`.
  template <class Part>
  static Flag inside(Flag<Part> inner, Part Flags::*part) {
    Flag outer(std::move(inner.info));
    outer.bind = [b = std::move(inner.bind), part](CLI::App& app, Flags& f,
                                                   const std::string& names) {
      return b(app, f.*part, names);
    };
    return outer;
  }

 private:
  template <class T>
  static FlagBinder<Flags> binder(T Flags::*member) {
    return [member](CLI::App& app, Flags& flags, const std::string& names) -> CLI::Option* {
      if constexpr (std::is_same_v<T, bool>) {
        return app.add_flag(names, flags.*member);
      } else {
        return app.add_option(names, flags.*member);
      }
    };
  }
};

// What a config file gave besides flag defaults.
struct ConfigFileSettings {
  std::vector<ConfigValue> file_only;  // the values of FlagScope::kFileOnly keys, in file order
  std::set<std::string> keys;          // every key the file set
};

// What FlagTable::parse gave besides the values it wrote.
struct ParsedFlags {
  // Set when --help or --version was asked for: the text to print; the program exits 0.
  std::optional<std::string> output;
  std::string config_path;             // the FlagScope::kConfigPath flag's value; empty: none
  ConfigFileSettings from_file;        // what that file gave besides defaults
  std::vector<std::string> remaining;  // ParseOptions::prefix_command: the program's command
};

struct ParseOptions {
  // Everything from the first positional argument on belongs to the program run (ddprun's
  // script and its arguments): never expanded, checked or parsed. Default: no positionals.
  bool prefix_command = false;
};

// The part of a table that does not depend on where values go.
class FlagCatalog {
 public:
  FlagCatalog(FlagSpelling spelling, std::vector<FlagInfo> flags);

  const std::vector<FlagInfo>& flags() const { return flags_; }
  // "-m,--no_python,--no-python": the names CLI11 is given.
  std::string option_names(const FlagInfo& flag) const;
  // "--no-python": the spelling every program accepts.
  static std::string long_name(const FlagInfo& flag);
  // "PET_NO_PYTHON"; empty without an env prefix.
  std::string env_name(const FlagInfo& flag) const;
  // The config file's keys: every flag but the command-line-only ones.
  std::vector<ConfigKey> config_schema() const;

  // Finishes an option just bound: help, environment name, default, last-one-wins.
  Status configure(const FlagInfo& flag, CLI::Option& option) const;
  // The --config path in `args`: a throwaway parse that knows which flags take a value.
  // `prefix_command`: everything from the first positional on belongs to the program run.
  std::string find_config_path(const std::vector<std::string>& args, bool prefix_command) const;
  // Loads `path` and makes its flag values the defaults of `app`'s options (declared by
  // FlagTable::declare). Errors name file:line:column and the key.
  Result<ConfigFileSettings> apply_config_file(const std::string& path, CLI::App& app) const;
  // After `app` parsed: every flag given (command line or environment) passes its check.
  Status check_parsed(const CLI::App& app) const;
  // `args` with each abbreviated long flag ("--nproc_per_nod") replaced by the flag's name, as
  // argparse accepts an unambiguous prefix ('-' and '_' alike; both spellings of one setting
  // are one candidate). An ambiguous prefix is an error listing the candidates; an unknown
  // long flag, an error with a "did you mean". Values of flags are skipped, not expanded.
  Result<std::vector<std::string>> expand_abbreviations(const std::vector<std::string>& args,
                                                        bool prefix_command) const;
  // The whole parse on `app`, whose options FlagTable::declare made (see FlagTable::parse).
  Result<ParsedFlags> parse(CLI::App& app, const std::vector<std::string>& args,
                            ParseOptions options) const;

 private:
  FlagSpelling spelling_;
  std::vector<FlagInfo> flags_;
};

// A program's settings: their catalog, and where each value goes in `Flags`.
template <class Flags>
class FlagTable {
 public:
  FlagTable(FlagSpelling spelling, std::vector<Flag<Flags>> flags)
      : catalog_(spelling, infos(flags)), flags_(std::move(flags)) {}

  const FlagCatalog& catalog() const { return catalog_; }

  // The whole parse of `args` (argv without argv[0]) on `app`, writing into `values`: declare,
  // expand abbreviations, apply the --config file, parse, check. Every error is
  // Status::invalid_argument naming the flag (or file:line:column and key) and the value.
  // Never throws; `app` may carry the program's own settings (name, footer, --version).
  Result<ParsedFlags> parse(CLI::App& app, Flags& values, const std::vector<std::string>& args,
                            ParseOptions options) const {
    if (Status s = declare(app, values); !s) return s;
    return catalog_.parse(app, args, options);
  }

  // Declares every flag on `app`, writing into `values`: each option gets its spellings,
  // help, environment variable and default (the fallback variable's, when set). An error
  // names a fallback variable whose value fails its check.
  Status declare(CLI::App& app, Flags& values) const {
    for (const Flag<Flags>& flag : flags_) {
      if (flag.info.scope == FlagScope::kFileOnly) continue;
      CLI::Option* option = flag.bind(app, values, catalog_.option_names(flag.info));
      if (Status s = catalog_.configure(flag.info, *option); !s) return s;
    }
    return {};
  }

 private:
  static std::vector<FlagInfo> infos(const std::vector<Flag<Flags>>& flags) {
    std::vector<FlagInfo> out;
    out.reserve(flags.size());
    for (const auto& f : flags) out.push_back(f.info);
    return out;
  }

  FlagCatalog catalog_;
  std::vector<Flag<Flags>> flags_;
};

}  // namespace ddprun
