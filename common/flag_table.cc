#include "common/flag_table.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

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
Status flag_error(const std::string& flag, const std::string& text, const Status& why) {
  if (why.message().rfind("--", 0) == 0) return Status::invalid_argument(why.message());
  return Status::invalid_argument(fmt::format("{}={}: {}", flag, text, why.message()));
}

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
    if (flag.scope == FlagScope::kCommandLineOnly) continue;
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
  for (const FlagInfo& flag : flags_) {
    if (flag.scope == FlagScope::kFileOnly) continue;
    if (flag.type == ConfigType::kBool) {
      app.add_flag(option_names(flag));
    } else {
      app.add_option(option_names(flag));
    }
  }
  std::string path;
  app.add_option("--config", path);
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
    if (flag.scope == FlagScope::kFileOnly || flag.type == ConfigType::kBool || !flag.check) {
      continue;
    }
    const CLI::Option* option = app.get_option_no_throw(long_name(flag));
    if (!option || option->count() == 0) continue;  // a default, checked where it came from
    const std::vector<std::string> texts = flag.scope == FlagScope::kCommandLineOnly
                                               ? option->results()  // every repetition
                                               : std::vector{option->as<std::string>()};
    for (const std::string& text : texts) {
      if (Status s = flag.check(text); !s) {
        return flag_error(spelling_.underscores ? "--" + flag.name : long_name(flag), text, s);
      }
    }
  }
  return {};
}

}  // namespace ddprun
