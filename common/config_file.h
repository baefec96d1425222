// Settings from a YAML config file (ddprun --config job.yaml, ddp-rendezvous --config
// daemon.yaml): a mapping of keys to scalars, lists or maps, each checked against a schema and
// kept with its place in the file, so that every error says where: "job.yaml:4:16: key
// 'max_restarts': ...". yaml-cpp does the YAML; this unit does the checking.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

namespace ddprun {

enum class ConfigType {
  kString,   // a scalar, taken as text
  kBool,     // true/false (YAML's spellings: yes/no, on/off too)
  kInteger,  // a whole number
  kNumber,   // a number (seconds, ...)
  kScalar,   // a string or a number (e.g. nproc_per_node: 4 or "gpu")
  kList,     // a sequence of scalars, or one scalar (a list of one)
  kMap,      // a mapping of scalar keys to scalars
};
const char* to_string(ConfigType type);

struct ConfigKey {
  std::string name;
  ConfigType type = ConfigType::kString;
  // Optional further check of a scalar's text (a range, a choice). Returns an error message
  // without location; the loader prefixes "file:line:column: key 'name': ".
  std::function<Status(const std::string& text)> check;
};

struct ConfigValue {
  std::string key;
  std::string text;                                      // scalars (booleans as "true"/"false")
  std::vector<std::string> list;                         // kList
  std::vector<std::pair<std::string, std::string>> map;  // kMap, in file order
  std::string where;                                     // "file:line:column" of the value
};

// Reads `path` against `schema`. Errors (kind kInvalidArgument) name the place and the key: a
// file that cannot be read, YAML syntax, a top level that is not a mapping, an unknown key (with
// a "did you mean" for a near miss), a key given twice, a value of the wrong type, or one that
// `check` refuses. Never throws.
Result<std::vector<ConfigValue>> load_config_file(const std::string& path,
                                                  const std::vector<ConfigKey>& schema);
// The same checks on YAML text already in memory; `source` stands for the path in every place
// ("<source>:line:column"). For callers that hold the text (the fuzz target). Never throws.
Result<std::vector<ConfigValue>> load_config_text(const std::string& text,
                                                  const std::string& source,
                                                  const std::vector<ConfigKey>& schema);

// Checks for ConfigKey::check: a number within [min, max], and one of `choices`.
std::function<Status(const std::string&)> in_range(double min, double max);
std::function<Status(const std::string&)> one_of(std::vector<std::string> choices);

}  // namespace ddprun
