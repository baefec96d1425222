// ddprun --config job.yaml: YAML read by common/config_file against the real job schema
// (launcher/job_config.h), whose checks run the launcher's value parsers (--nnodes,
// --nproc_per_node, --redirects, ...). Through load_config_text, the in-memory twin of
// load_config_file.
//
// Properties: nothing throws or crashes; every refusal is kInvalidArgument and starts with the
// file's name (errors say where); accepted values are known keys, each once, each with its
// place in the file.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "common/config_file.h"
#include "fuzz/fuzz_check.h"
#include "launcher/job_config.h"

using namespace ddprun;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(fuzz::as_text(data, size));
  const auto& schema = launcher::job_config_schema();
  auto values = load_config_text(text, "job.yaml", schema);
  if (!values) {
    FUZZ_CHECK(values.status().is_invalid_argument());
    FUZZ_CHECK(fuzz::starts_with(values.error_message(), "job.yaml"));
    return 0;
  }
  std::set<std::string> names, seen;
  for (const ConfigKey& key : schema) names.insert(key.name);
  for (const ConfigValue& v : *values) {
    FUZZ_CHECK(names.count(v.key) == 1);
    FUZZ_CHECK(seen.insert(v.key).second);
    FUZZ_CHECK(fuzz::starts_with(v.where, "job.yaml:"));
  }
  return 0;
}
