#include "common/config_file.h"

#include <charconv>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "common/suggest.h"

namespace ddprun {
namespace {

std::string place(const std::string& path, const YAML::Mark& mark) {
  // yaml-cpp counts from 0; editors and compilers from 1.
  return fmt::format("{}:{}:{}", path, mark.line + 1, mark.column + 1);
}

bool is_integer(const std::string& text) {
  long long value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end;
}

bool is_number(const std::string& text) {
  if (text.empty()) return false;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  return *end == '\0' && std::isfinite(value);
}

// YAML 1.1's booleans, as yaml-cpp reads them.
std::optional<bool> as_bool(const std::string& text) {
  static const std::set<std::string> yes = {"true", "True", "TRUE", "yes", "Yes", "YES",
                                            "on",   "On",   "ON",   "y",   "Y"};
  static const std::set<std::string> no = {"false", "False", "FALSE", "no", "No", "NO",
                                           "off",   "Off",   "OFF",   "n",  "N"};
  if (yes.count(text)) return true;
  if (no.count(text)) return false;
  return std::nullopt;
}

// Fills `value` from `node` as `key` wants, or says what is wrong (without location).
Status convert(const YAML::Node& node, const ConfigKey& key, ConfigValue& value) {
  auto scalar_error = [&] {
    return Status::invalid_argument(fmt::format("expected {}, got a {}", to_string(key.type),
                                                node.IsMap() ? "mapping" : "list"));
  };
  switch (key.type) {
    case ConfigType::kList:
      if (node.IsScalar()) {
        value.list.push_back(node.Scalar());
        return {};
      }
      if (!node.IsSequence()) return Status::invalid_argument("expected a list of values");
      for (const auto& item : node) {
        if (!item.IsScalar()) return Status::invalid_argument("expected a list of plain values");
        value.list.push_back(item.Scalar());
      }
      return {};
    case ConfigType::kMap:
      if (!node.IsMap()) return Status::invalid_argument("expected a mapping of key: value");
      for (const auto& entry : node) {
        if (!entry.first.IsScalar() || !entry.second.IsScalar()) {
          return Status::invalid_argument("expected a mapping of plain keys to plain values");
        }
        value.map.emplace_back(entry.first.Scalar(), entry.second.Scalar());
      }
      return {};
    default:
      break;
  }
  if (!node.IsScalar()) return scalar_error();
  value.text = node.Scalar();
  switch (key.type) {
    case ConfigType::kBool: {
      auto b = as_bool(value.text);
      if (!b) return Status::invalid_argument("'" + value.text + "' is not true or false");
      value.text = *b ? "true" : "false";
      break;
    }
    case ConfigType::kInteger:
      if (!is_integer(value.text)) {
        return Status::invalid_argument("'" + value.text + "' is not a whole number");
      }
      break;
    case ConfigType::kNumber:
      if (!is_number(value.text))
        return Status::invalid_argument("'" + value.text + "' is not a number");
      break;
    default:
      break;
  }
  return key.check ? key.check(value.text) : Status();
}

std::vector<std::string> names_of(const std::vector<ConfigKey>& schema) {
  std::vector<std::string> names;
  names.reserve(schema.size());
  for (const auto& k : schema) names.push_back(k.name);
  return names;
}

}  // namespace

const char* to_string(ConfigType type) {
  switch (type) {
    case ConfigType::kString:
      return "a string";
    case ConfigType::kBool:
      return "true or false";
    case ConfigType::kInteger:
      return "a whole number";
    case ConfigType::kNumber:
      return "a number";
    case ConfigType::kScalar:
      return "a value";
    case ConfigType::kList:
      return "a list";
    case ConfigType::kMap:
      return "a mapping";
  }
  return "a value";
}

namespace {

// Checks a parsed document against `schema`; `path` names it in errors.
Result<std::vector<ConfigValue>> check_document(const YAML::Node& root, const std::string& path,
                                                const std::vector<ConfigKey>& schema) {
  if (root.IsNull()) return std::vector<ConfigValue>{};  // an empty file sets nothing
  if (!root.IsMap()) {
    return Status::invalid_argument(
        fmt::format("{}: expected a mapping of settings (key: value) at the top level",
                    place(path, root.Mark())));
  }
  std::vector<ConfigValue> values;
  std::set<std::string> seen;
  for (const auto& entry : root) {
    const std::string where_key = place(path, entry.first.Mark());
    if (!entry.first.IsScalar()) {
      return Status::invalid_argument(fmt::format("{}: a key must be a plain name", where_key));
    }
    const std::string name = entry.first.Scalar();
    const ConfigKey* key = nullptr;
    for (const auto& k : schema) {
      if (k.name == name) key = &k;
    }
    if (!key) {
      return Status::invalid_argument(fmt::format("{}: unknown key '{}'{}", where_key, name,
                                                  did_you_mean(name, names_of(schema))));
    }
    if (!seen.insert(name).second) {
      return Status::invalid_argument(fmt::format("{}: key '{}' given twice", where_key, name));
    }
    ConfigValue value;
    value.key = name;
    value.where = place(path, entry.second.Mark());
    if (Status s = convert(entry.second, *key, value); !s) {
      return Status::invalid_argument(
          fmt::format("{}: key '{}': {}", value.where, name, s.message()));
    }
    values.push_back(std::move(value));
  }
  return values;
}

// Parses with `parse` (a file or text), turning yaml-cpp's exceptions into errors with a place.
template <class Parse>
Result<std::vector<ConfigValue>> load_with(Parse parse, const std::string& path,
                                           const std::vector<ConfigKey>& schema) {
  YAML::Node root;
  try {
    root = parse();
  } catch (const YAML::BadFile&) {
    return Status::invalid_argument(fmt::format("{}: cannot read the config file", path));
  } catch (const YAML::ParserException& e) {
    return Status::invalid_argument(
        fmt::format("{}: not valid YAML: {}", place(path, e.mark), e.msg));
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(fmt::format("{}: {}", path, e.what()));
  }
  return check_document(root, path, schema);
}

}  // namespace

Result<std::vector<ConfigValue>> load_config_file(const std::string& path,
                                                  const std::vector<ConfigKey>& schema) {
  return load_with([&] { return YAML::LoadFile(path); }, path, schema);
}

Result<std::vector<ConfigValue>> load_config_text(const std::string& text,
                                                  const std::string& source,
                                                  const std::vector<ConfigKey>& schema) {
  return load_with([&] { return YAML::Load(text); }, source, schema);
}

std::function<Status(const std::string&)> in_range(double min, double max) {
  return [min, max](const std::string& text) -> Status {
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (*end != '\0' || !std::isfinite(value))
      return Status::invalid_argument("'" + text + "' is not a number");
    if (value < min || value > max) {
      return Status::invalid_argument(fmt::format("{} is out of range [{}, {}]", text, min, max));
    }
    return {};
  };
}

std::function<Status(const std::string&)> one_of(std::vector<std::string> choices) {
  return [choices = std::move(choices)](const std::string& text) -> Status {
    for (const auto& c : choices) {
      if (c == text) return {};
    }
    return Status::invalid_argument(fmt::format(
        "'{}' is not one of: {}{}", text, fmt::join(choices, ", "), did_you_mean(text, choices)));
  };
}

}  // namespace ddprun
