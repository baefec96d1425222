#include "launcher/job_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agent/numa_binding.h"
#include "launcher/value_parsers.h"
#include "rendezvous/rdzv_conf.h"

namespace ddprun::launcher {
namespace {

// Adapts a value parser to a ConfigKey check: the parser's own message, location added later.
template <class Parse>
std::function<Status(const std::string&)> parses(Parse parse) {
  return [parse](const std::string& text) -> Status { return parse(text).status(); };
}

std::string join_list(const ConfigValue& v, bool escape_commas) {
  std::vector<std::string> items;
  for (std::string item : v.list) {
    if (escape_commas) {
      std::string escaped;
      for (char c : item) escaped += c == ',' ? std::string(",,") : std::string(1, c);
      item = escaped;
    }
    items.push_back(item);
  }
  return fmt::format("{}", fmt::join(items, ","));
}

std::string join_map(const ConfigValue& v) {
  std::vector<std::string> items;
  for (const auto& [key, value] : v.map) items.push_back(key + "=" + value);
  return fmt::format("{}", fmt::join(items, ","));
}

// The command line's text for a key's value: lists and maps as the flag spells them.
std::string flag_text(const ConfigValue& v) {
  if (v.key == "rdzv_conf") return join_map(v);
  if (v.key == "duplicate_stdout_filters" || v.key == "duplicate_stderr_filters") {
    return join_list(v, /*escape_commas=*/true);
  }
  if (!v.list.empty()) return join_list(v, /*escape_commas=*/false);
  return v.text;
}

}  // namespace

const std::vector<ConfigKey>& job_config_schema() {
  using T = ConfigType;
  static const std::vector<ConfigKey> schema = {
      {"nnodes", T::kScalar, parses(parse_nnodes)},
      {"nproc_per_node", T::kScalar, parses(parse_nproc_per_node)},
      {"node_rank", T::kInteger, in_range(0, 1e6)},
      {"rdzv_backend", T::kString, one_of({"static", "c10d"})},
      {"rdzv_endpoint", T::kString, {}},
      {"rdzv_id", T::kScalar, {}},
      {"rdzv_conf", T::kMap, {}},
      {"standalone", T::kBool, {}},
      {"max_restarts", T::kInteger, in_range(0, 1e9)},
      {"monitor_interval", T::kNumber, in_range(0, 1e9)},
      {"start_method", T::kString, one_of({"spawn", "fork", "forkserver"})},
      {"role", T::kString, {}},
      {"module", T::kBool, {}},
      {"no_python", T::kBool, {}},
      {"run_path", T::kBool, {}},
      {"log_dir", T::kString, {}},
      {"redirects", T::kScalar,
       [](const std::string& t) { return parse_std_streams("redirects", t).status(); }},
      {"tee", T::kScalar,
       [](const std::string& t) { return parse_std_streams("tee", t).status(); }},
      {"local_ranks_filter", T::kList, {}},
      {"master_addr", T::kString, {}},
      {"master_port", T::kInteger, in_range(0, 65535)},
      {"local_addr", T::kString, {}},
      {"shutdown_timeout", T::kNumber, in_range(0, 1e9)},
      {"signals_to_handle", T::kList, {}},
      {"signals_to_forward", T::kList, {}},
      {"exit_barrier_timeout", T::kNumber, in_range(0, 1e9)},
      {"virtual_local_rank", T::kBool, {}},
      {"duplicate_stdout_filters", T::kList, {}},
      {"duplicate_stderr_filters", T::kList, {}},
      {"numa_binding", T::kString, parses(agent::parse_numa_mode)},
      {"logs_specs", T::kString, {}},
      {"event_log_handler", T::kString, {}},
      {"log_line_prefix_template", T::kString, {}},
      {"hang_timeout", T::kNumber, in_range(0, 1e9)},
      {"first_heartbeat_timeout", T::kNumber, in_range(0, 1e9)},
      {"metrics_port", T::kInteger, in_range(0, 65535)},
      {"metrics_addr", T::kString, {}},
      {"training_script", T::kString, {}},
      {"training_script_args", T::kList, {}},
      {"env", T::kMap, {}},
  };
  return schema;
}

Result<JobConfigExtras> apply_job_config(const std::string& path, CLI::App& app) {
  auto values = load_config_file(path, job_config_schema());
  if (!values) return values.status();
  JobConfigExtras extras;
  for (const ConfigValue& v : *values) {
    extras.keys.insert(v.key);
    auto fail = [&](const std::string& why) {
      return Status::invalid_argument(fmt::format("{}: key '{}': {}", v.where, v.key, why));
    };
    if (v.key == "training_script") {
      extras.entry_point.insert(extras.entry_point.begin(), v.text);
      continue;
    }
    if (v.key == "training_script_args") {
      extras.entry_point.insert(extras.entry_point.end(), v.list.begin(), v.list.end());
      continue;
    }
    if (v.key == "env") {
      for (const auto& [name, value] : v.map) extras.env[name] = value;
      continue;
    }
    const std::string text = flag_text(v);
    // Checks that need the joined form, with the key's location.
    if (v.key == "local_ranks_filter") {
      if (Status s = parse_rank_list("local_ranks_filter", text).status(); !s) {
        return fail(s.message());
      }
    } else if (v.key == "signals_to_handle" || v.key == "signals_to_forward") {
      if (Status s = parse_signal_list(text, v.key).status(); !s) return fail(s.message());
    } else if (v.key == "rdzv_conf") {
      if (Status s = rdzv::parse_rdzv_conf(text).status(); !s) return fail(s.message());
    }
    CLI::Option* option = app.get_option_no_throw("--" + v.key);
    if (!option) return fail("has no command-line flag (internal error)");
    try {
      option->run_callback_for_default(true)->default_val(text);
    } catch (const CLI::Error& e) {
      return fail(e.what());
    }
  }
  if (!extras.entry_point.empty() && !values->empty()) {
    bool has_script = false;
    for (const auto& v : *values) has_script = has_script || v.key == "training_script";
    if (!has_script) {
      return Status::invalid_argument(
          path + ": training_script_args without training_script: name the entry point");
    }
  }
  return extras;
}

}  // namespace ddprun::launcher
