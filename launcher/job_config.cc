#include "launcher/job_config.h"

#include "launcher/launcher_flags.h"

namespace ddprun::launcher {

const std::vector<ConfigKey>& job_config_schema() {
  static const std::vector<ConfigKey> schema = launcher_flag_table().catalog().config_schema();
  return schema;
}

Result<JobConfigExtras> apply_job_config(const std::string& path, CLI::App& app) {
  auto settings = launcher_flag_table().catalog().apply_config_file(path, app);
  if (!settings) return settings.status();
  return job_config_extras(path, *settings);
}

Result<JobConfigExtras> job_config_extras(const std::string& path,
                                          const ConfigFileSettings& settings) {
  JobConfigExtras extras;
  extras.keys = settings.keys;
  bool has_script = false;
  for (const ConfigValue& v : settings.file_only) {
    if (v.key == "training_script") {
      extras.entry_point.insert(extras.entry_point.begin(), v.text);
      has_script = true;
    } else if (v.key == "training_script_args") {
      extras.entry_point.insert(extras.entry_point.end(), v.list.begin(), v.list.end());
    } else if (v.key == "env") {
      for (const auto& [name, value] : v.map) extras.env[name] = value;
    }
  }
  if (!extras.entry_point.empty() && !has_script) {
    return Status::invalid_argument(
        path + ": training_script_args without training_script: name the entry point");
  }
  return extras;
}

}  // namespace ddprun::launcher
