#include "common/flag_table.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/suggest.h"

namespace ddprun {
namespace {

bool is_value_list(ConfigType type) {
  return type == ConfigType::kList || type == ConfigType::kMap;
}

// A list or mapping from the file as the flag spells it: "a,b" and "k=v,k2=v2".
std::string flag_text(const FlagInfo& flag, const ConfigValue& value) {
  if (flag.type == ConfigType::kMap) {
    std::vector<std::string> items;
    items.reserve(value.map.size());
    for (const auto& [key, v] : value.map) items.push_back(fmt::format("{}={}", key, v));
    return fmt::format("{}", fmt::join(items, ","));
  }
  if (flag.type != ConfigType::kList) return value.text;
  std::vector<std::string> items;
  for (const std::string& item : value.list) {
    if (!flag.commas_doubled) {
      items.push_back(item);
      continue;
    }
    std::string escaped;
    for (char c : item) escaped += c == ',' ? std::string(",,") : std::string(1, c);
    items.push_back(std::move(escaped));
  }
  return fmt::format("{}", fmt::join(items, ","));
}

// "--name=text: why", unless the check's message already names the flag.
Status flag_error(const FlagInfo& info, const std::string& flag, const std::string& text,
                  const Status& why) {
  if (info.check_names_flag) return Status::invalid_argument(why.message());
  return Status::invalid_argument(fmt::format("{}={}: {}", flag, text, why.message()));
}

// A long flag's name for matching: '-' and '_' alike, as both spellings are accepted.
std::string match_key(std::string_view name) {
  std::string key(name);
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

// CLI11's own flags, which every program here has.
const FlagInfo kHelpFlag{.name = "help", .type = ConfigType::kBool};
const FlagInfo kVersionFlag{.name = "version", .type = ConfigType::kBool};

}  // namespace

FlagCatalog::FlagCatalog(FlagSpelling spelling, std::vector<FlagInfo> flags)
    : spelling_(std::move(spelling)), flags_(std::move(flags)) {}

std::string FlagCatalog::option_names(const FlagInfo& flag) const {
  std::string names = flag.short_name.empty() ? "" : flag.short_name + ",";
  if (spelling_.underscores && flag.name.find('_') != std::string::npos) {
    names += "--" + flag.name + ",";
  }
  return names + long_name(flag);
}

std::string FlagCatalog::long_name(const FlagInfo& flag) {
  std::string dashed = "--" + flag.name;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  return dashed;
}

std::string FlagCatalog::env_name(const FlagInfo& flag) const {
  if (spelling_.env_prefix.empty()) return {};
  std::string env = spelling_.env_prefix + flag.name;
  std::transform(env.begin(), env.end(), env.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return env;
}

std::vector<ConfigKey> FlagCatalog::config_schema() const {
  std::vector<ConfigKey> schema;
  for (const FlagInfo& flag : flags_) {
    if (flag.scope == FlagScope::kCommandLineOnly || flag.scope == FlagScope::kConfigPath) {
      continue;
    }
    // Lists and mappings are checked once joined, as the flag would read them.
    schema.push_back({flag.name, flag.type, is_value_list(flag.type) ? FlagCheck{} : flag.check});
  }
  return schema;
}

Status FlagCatalog::configure(const FlagInfo& flag, CLI::Option& option) const {
  option.description(flag.help);
  if (const std::string env = env_name(flag); !env.empty()) option.envname(env);
  if (flag.type != ConfigType::kBool) {
    const bool repeatable = flag.scope == FlagScope::kCommandLineOnly;
    option.multi_option_policy(repeatable ? CLI::MultiOptionPolicy::TakeAll
                                          : CLI::MultiOptionPolicy::TakeLast);
  }
  std::string default_text = flag.default_text;
  if (!flag.fallback_env.empty()) {
    if (const char* v = std::getenv(flag.fallback_env.c_str()); v && *v) {
      if (flag.check) {
        if (Status s = flag.check(v); !s) {
          return Status::invalid_argument(
              fmt::format("{}={}: {}", flag.fallback_env, v, s.message()));
        }
      }
      default_text = v;
    }
  }
  try {
    if (!default_text.empty()) {
      option.run_callback_for_default(true)->default_val(default_text);
    } else if (flag.type != ConfigType::kBool && flag.scope == FlagScope::kEverywhere) {
      option.capture_default_str();
    }
  } catch (const CLI::Error& e) {
    return Status::invalid_argument(
        fmt::format("--{}: default '{}': {}", flag.name, default_text, e.what()));
  }
  return {};
}

std::string FlagCatalog::find_config_path(const std::vector<std::string>& args,
                                          bool prefix_command) const {
  CLI::App app;
  std::string path;
  for (const FlagInfo& flag : flags_) {
    if (flag.scope == FlagScope::kFileOnly) continue;
    if (flag.scope == FlagScope::kConfigPath) {
      app.add_option(option_names(flag), path);
    } else if (flag.type == ConfigType::kBool) {
      app.add_flag(option_names(flag));
    } else {
      app.add_option(option_names(flag));
    }
  }
  app.set_help_flag();
  app.allow_extras();
  if (prefix_command) app.prefix_command();
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 reads from the back
    app.parse(reversed);
  } catch (const CLI::Error&) {
    // The real parse reports it.
  }
  return path;
}

Result<ConfigFileSettings> FlagCatalog::apply_config_file(const std::string& path,
                                                          CLI::App& app) const {
  auto values = load_config_file(path, config_schema());
  if (!values) return values.status();
  ConfigFileSettings settings;
  for (const ConfigValue& value : *values) {
    settings.keys.insert(value.key);
    auto flag = std::find_if(flags_.begin(), flags_.end(),
                             [&](const FlagInfo& f) { return f.name == value.key; });
    auto fail = [&](const std::string& why) {
      return Status::invalid_argument(fmt::format("{}: key '{}': {}", value.where, value.key, why));
    };
    if (flag->scope == FlagScope::kFileOnly) {
      settings.file_only.push_back(value);
      continue;
    }
    const std::string text = flag_text(*flag, value);
    if (is_value_list(flag->type) && flag->check) {
      if (Status s = flag->check(text); !s) return fail(s.message());
    }
    CLI::Option* option = app.get_option_no_throw(long_name(*flag));
    if (!option) return fail("has no command-line flag (internal error)");
    try {
      option->run_callback_for_default(true)->default_val(text);
    } catch (const CLI::Error& e) {
      return fail(e.what());
    }
  }
  return settings;
}

Status FlagCatalog::check_parsed(const CLI::App& app) const {
  for (const FlagInfo& flag : flags_) {
    if (flag.scope == FlagScope::kFileOnly || flag.scope == FlagScope::kConfigPath ||
        flag.type == ConfigType::kBool || !flag.check) {
      continue;
    }
    const CLI::Option* option = app.get_option_no_throw(long_name(flag));
    if (!option || option->count() == 0) continue;  // a default, checked where it came from
    const std::vector<std::string> texts = flag.scope == FlagScope::kCommandLineOnly
                                               ? option->results()  // every repetition
                                               : std::vector{option->as<std::string>()};
    for (const std::string& text : texts) {
      if (Status s = flag.check(text); !s) {
        return flag_error(flag, spelling_.underscores ? "--" + flag.name : long_name(flag), text,
                          s);
      }
    }
  }
  return {};
}

Result<std::vector<std::string>> FlagCatalog::expand_abbreviations(
    const std::vector<std::string>& args, bool prefix_command) const {
  std::vector<const FlagInfo*> known{&kHelpFlag, &kVersionFlag};
  std::vector<std::string> names{"--help", "--version"};  // for "did you mean"
  for (const FlagInfo& flag : flags_) {
    if (flag.scope == FlagScope::kFileOnly) continue;
    known.push_back(&flag);
    names.push_back(spelling_.underscores ? "--" + flag.name : long_name(flag));
  }
  auto spelled = [&](const FlagInfo& flag) {
    return spelling_.underscores ? "--" + flag.name : long_name(flag);
  };
  std::vector<std::string> out;
  out.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    out.push_back(arg);
    if (arg == "--") {  // the rest is the program's
      out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      if (!prefix_command) continue;
      out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;  // the program's name: it and everything after are the program's
    }
    if (arg[1] != '-') {  // a short flag: -m, -r 3, -r3
      const bool takes_value = std::any_of(flags_.begin(), flags_.end(), [&](const FlagInfo& f) {
        return f.short_name == arg && f.type != ConfigType::kBool;
      });
      if (takes_value && i + 1 < args.size()) out.push_back(args[++i]);
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string typed = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const std::string key = match_key(typed);
    const FlagInfo* exact = nullptr;
    std::vector<const FlagInfo*> candidates;
    for (const FlagInfo* flag : known) {
      const std::string name = match_key(flag->name);
      if (name == key) exact = flag;
      if (name.compare(0, key.size(), key) == 0) candidates.push_back(flag);
    }
    const FlagInfo* flag = exact ? exact : candidates.size() == 1 ? candidates.front() : nullptr;
    if (!flag && candidates.size() > 1) {
      std::vector<std::string> spelled_names;
      spelled_names.reserve(candidates.size());
      for (const FlagInfo* c : candidates) spelled_names.push_back(spelled(*c));
      return Status::invalid_argument(fmt::format("ambiguous option: --{} could match {}", typed,
                                                  fmt::join(spelled_names, ", ")));
    }
    if (!flag) {
      return Status::invalid_argument(
          fmt::format("unrecognized argument: --{}{}; --help lists the flags{}", typed,
                      did_you_mean("--" + typed, names),
                      prefix_command ? ", and the program's own flags go after its name" : ""));
    }
    if (!exact) {  // as the flag's own spelling: what CLI11 knows
      out.back() = spelled(*flag) + (eq == std::string::npos ? "" : arg.substr(eq));
    }
    if (eq == std::string::npos && flag->type != ConfigType::kBool && i + 1 < args.size()) {
      out.push_back(args[++i]);  // its value, whatever it looks like
    }
  }
  return out;
}

Result<ParsedFlags> FlagCatalog::parse(CLI::App& app, const std::vector<std::string>& args,
                                       ParseOptions options) const {
  auto expanded = expand_abbreviations(args, options.prefix_command);
  if (!expanded) return expanded.status();
  ParsedFlags parsed;
  if (options.prefix_command) app.prefix_command();
  parsed.config_path = find_config_path(*expanded, options.prefix_command);
  if (!parsed.config_path.empty()) {
    auto settings = apply_config_file(parsed.config_path, app);  // values become defaults
    if (!settings) return settings.status();
    parsed.from_file = std::move(*settings);
  }
  try {
    std::vector<std::string> reversed(expanded->rbegin(),
                                      expanded->rend());  // CLI11: from the back
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    parsed.output = app.help();
    return parsed;
  } catch (const CLI::CallForVersion& version) {
    parsed.output = version.what();
    return parsed;
  } catch (const CLI::ParseError& e) {
    return Status::invalid_argument(e.what());
  }
  if (Status checked = check_parsed(app); !checked) return checked;
  parsed.remaining = app.remaining();
  return parsed;
}

}  // namespace ddprun
