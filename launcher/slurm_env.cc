#include "launcher/slurm_env.h"

#include <charconv>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agent/process/exit_status.h"
#include "launcher/hostlist.h"
#include "launcher/value_parsers.h"

namespace ddprun::launcher {
namespace {

// SLURM numbers its special steps (batch script, extern, interactive) above this.
constexpr unsigned long long kMaxNormalStepId = 0xfffffff0ULL;

std::optional<std::string> get(const agent::EnvMap& env, const char* key) {
  auto it = env.find(key);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

// The first of `keys` that is set, as {name, value}.
std::optional<std::pair<std::string, std::string>> first_of(
    const agent::EnvMap& env, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    if (auto v = get(env, key)) return std::make_pair(std::string(key), *v);
  }
  return std::nullopt;
}

// A whole non-negative decimal number below 10^9.
std::optional<int> to_count(const std::string& text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value < 0 || value >= 1000000000) return std::nullopt;
  return value;
}

Status bad_variable(const std::string& name, const std::string& value, const std::string& why) {
  return Status::invalid_argument(
      fmt::format("SLURM environment: {}={} {} (run ddprun with the rendezvous flags to "
                  "configure it yourself)",
                  name, value, why));
}

Result<int> count_of(const std::pair<std::string, std::string>& var) {
  auto n = to_count(var.second);
  if (!n) return bad_variable(var.first, var.second, "is not a count");
  return *n;
}

bool is_srun_step(const std::string& step_id) {
  unsigned long long id = 0;
  auto [ptr, ec] = std::from_chars(step_id.data(), step_id.data() + step_id.size(), id);
  return ec == std::errc() && ptr == step_id.data() + step_id.size() && id < kMaxNormalStepId;
}

// The step's node count and first host, from the step's variables when srun set both, else
// from the job's.
Status read_nodes(const agent::EnvMap& env, SlurmStep& step) {
  const bool step_level = get(env, "SLURM_STEP_NUM_NODES") && get(env, "SLURM_STEP_NODELIST");
  auto nodes = step_level ? first_of(env, {"SLURM_STEP_NUM_NODES"})
                          : first_of(env, {"SLURM_NNODES", "SLURM_JOB_NUM_NODES"});
  auto list = step_level ? first_of(env, {"SLURM_STEP_NODELIST"})
                         : first_of(env, {"SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  if (!nodes || !list) {
    return Status::invalid_argument(
        "SLURM environment: SLURM_JOB_ID and SLURM_NODEID are set but the node count or node "
        "list is not (SLURM_NNODES, SLURM_JOB_NODELIST)");
  }
  auto count = count_of(*nodes);
  if (!count) return count.status();
  if (*count < 1) return bad_variable(nodes->first, nodes->second, "is not a node count");
  auto hosts = expand_hostlist(list->second);
  if (!hosts)
    return bad_variable(list->first, list->second, "is unusable: " + hosts.error_message());
  if (hosts->size() != static_cast<std::size_t>(*count)) {
    return bad_variable(
        list->first, list->second,
        fmt::format("names {} hosts, but {}={}", hosts->size(), nodes->first, nodes->second));
  }
  step.nnodes = *count;
  step.nnodes_from = nodes->first;
  step.first_host = hosts->front();
  step.nodelist_from = list->first;
  return {};
}

// Workers per node: the node's GPUs, else the tasks per node the job asked for.
Status read_workers(const agent::EnvMap& env, SlurmStep& step) {
  if (auto gpus = first_of(env, {"SLURM_GPUS_ON_NODE"})) {
    auto n = count_of(*gpus);
    if (!n) return n.status();
    if (*n > 0) {
      step.workers = *n;
      step.workers_from = gpus->first;
      return {};
    }
  }
  if (auto tasks = first_of(env, {"SLURM_NTASKS_PER_NODE"})) {
    auto n = count_of(*tasks);
    if (!n) return n.status();
    if (*n > 0) {
      step.workers = *n;
      step.workers_from = tasks->first;
    }
  }
  return {};
}

// srun --resv-ports: the same ports on every node of the step, e.g. "12000-12003" or "12000".
Status read_port(const agent::EnvMap& env, SlurmStep& step) {
  auto ports = get(env, "SLURM_STEP_RESV_PORTS");
  if (!ports) return {};
  const std::string first = ports->substr(0, ports->find_first_of("-,"));
  auto port = to_count(first);
  if (!port || *port < 1 || *port > 65535) {
    return bad_variable("SLURM_STEP_RESV_PORTS", *ports, "does not start with a TCP port");
  }
  step.rdzv_port = static_cast<uint16_t>(*port);
  return {};
}

// srun started one ddprun per task: more than one on a node would make each its own "node".
Status check_one_task_per_node(const agent::EnvMap& env) {
  auto tasks = get(env, "SLURM_STEP_NUM_TASKS");
  auto nodes = get(env, "SLURM_STEP_NUM_NODES");
  if (!tasks || !nodes) return {};
  auto t = to_count(*tasks);
  auto n = to_count(*nodes);
  if (t && n && *t > *n) {
    return Status::invalid_argument(fmt::format(
        "SLURM environment: this step runs {} tasks on {} nodes, so srun started several ddprun "
        "on a node; ddprun starts the workers itself: run one task per node (srun "
        "--ntasks-per-node=1) and give the workers per node with --gpus-per-node or "
        "--nproc_per_node",
        *t, *n));
  }
  return {};
}

}  // namespace

Result<std::optional<SlurmStep>> read_slurm_step(const agent::EnvMap& env) {
  auto job = get(env, "SLURM_JOB_ID");
  auto step_id = first_of(env, {"SLURM_STEP_ID", "SLURM_STEPID"});
  auto node_id = get(env, "SLURM_NODEID");
  if (!job || !step_id || !node_id || !is_srun_step(step_id->second)) {
    return std::optional<SlurmStep>();
  }
  SlurmStep step;
  step.job_id = *job;
  step.step_id = step_id->second;
  if (Status s = check_one_task_per_node(env); !s) return s;
  if (Status s = read_nodes(env, step); !s) return s;
  auto id = to_count(*node_id);
  if (!id || *id >= step.nnodes) {
    return bad_variable(
        "SLURM_NODEID", *node_id,
        fmt::format("is not a node of the step ({}={})", step.nnodes_from, step.nnodes));
  }
  step.node_id = *id;
  step.node_name = get(env, "SLURMD_NODENAME").value_or("");
  if (Status s = read_workers(env, step); !s) return s;
  if (Status s = read_port(env, step); !s) return s;
  return std::optional<SlurmStep>(std::move(step));
}

std::vector<SlurmSetting> slurm_settings(const SlurmStep& step, const GivenSettings& given) {
  std::vector<SlurmSetting> out;
  auto offer = [&](const char* key, std::string value, std::string from) {
    if (!given.given(key)) out.push_back({key, std::move(value), std::move(from)});
  };
  if (!given.user_rendezvous) {
    offer("nnodes", std::to_string(step.nnodes), step.nnodes_from);
    offer("node_rank", std::to_string(step.node_id), "SLURM_NODEID");
    offer("rdzv_backend", "c10d", "srun");
    offer("rdzv_endpoint", fmt::format("{}:{}", step.first_host, step.rdzv_port),
          step.nodelist_from);
    offer("rdzv_id", fmt::format("slurm-{}.{}", step.job_id, step.step_id),
          "SLURM_JOB_ID.SLURM_STEP_ID");
    if (!step.node_name.empty()) offer("local_addr", step.node_name, "SLURMD_NODENAME");
  }
  if (step.workers) offer("nproc_per_node", std::to_string(*step.workers), step.workers_from);
  std::vector<std::string> forward;
  for (int signo : {SIGUSR1, SIGUSR2}) {
    const auto& handled = given.signals_to_handle;
    if (std::find(handled.begin(), handled.end(), signo) == handled.end()) {
      forward.push_back(agent::signal_name(signo));
    }
  }
  if (!forward.empty()) {
    offer("signals_to_forward", fmt::format("{}", fmt::join(forward, ",")), "srun");
  }
  return out;
}

std::string describe_slurm(const SlurmStep& step, const std::vector<SlurmSetting>& taken) {
  std::vector<std::string> items;
  items.reserve(taken.size());
  for (const auto& s : taken) items.push_back(fmt::format("--{} {} ({})", s.key, s.value, s.from));
  return fmt::format("SLURM job {} step {}, node {} of {}{}: {}", step.job_id, step.step_id,
                     step.node_id, step.nnodes,
                     step.node_name.empty() ? "" : " (" + step.node_name + ")",
                     items.empty() ? std::string("nothing taken, every setting was given")
                                   : "took " + fmt::format("{}", fmt::join(items, ", ")));
}

Result<std::optional<std::string>> apply_slurm_layer(CLI::App& app,
                                                     const std::set<std::string>& file_keys,
                                                     const agent::EnvMap& env) {
  auto step = read_slurm_step(env);
  if (!step) return step.status();
  if (!step->has_value()) return std::optional<std::string>();
  auto option = [&app](const std::string& key) { return app.get_option("--" + key); };
  GivenSettings given;
  given.given = [&](const std::string& key) {
    return option(key)->count() > 0 || file_keys.count(key) > 0;
  };
  try {
    given.user_rendezvous =
        (given.given("standalone") && option("standalone")->as<bool>()) ||
        (given.given("rdzv_backend") && option("rdzv_backend")->as<std::string>() == "static");
    if (auto handled = parse_signal_list(option("signals_to_handle")->as<std::string>())) {
      given.signals_to_handle = *handled;  // a bad list is the command line's error to report
    }
    const auto taken = slurm_settings(**step, given);
    for (const SlurmSetting& s : taken) {
      CLI::Option* o = option(s.key);
      o->add_result(s.value);
      o->run_callback();  // the flag's own conversion, as if given on the command line
    }
    return std::optional<std::string>(describe_slurm(**step, taken));
  } catch (const CLI::Error& e) {
    return Status::invalid_argument(std::string("SLURM environment: ") + e.what());
  }
}

}  // namespace ddprun::launcher
