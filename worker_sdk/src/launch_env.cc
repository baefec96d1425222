#include "ddp/launch_env.h"

#include <charconv>
#include <cstdlib>

#include "ddp/error.h"

namespace ddp {
namespace {

constexpr const char* kOp = "read_launch_env";

int parse_int(const EnvLookup& env, const std::string& name, int fallback, int min_value) {
  auto text = env(name);
  if (!text) return fallback;
  int value = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size() || value < min_value) {
    throw Error(-1, kOp,
                name + "='" + *text + "' is not an integer >= " + std::to_string(min_value));
  }
  return value;
}

bool parse_bool(const EnvLookup& env, const std::string& name) {
  auto text = env(name);
  if (!text) return false;
  // torchrun writes Python's str(bool): "True"/"False"; accept the usual spellings too.
  if (*text == "True" || *text == "true" || *text == "1") return true;
  if (*text == "False" || *text == "false" || *text == "0" || text->empty()) return false;
  throw Error(-1, kOp, name + "='" + *text + "' is not a boolean (True/False)");
}

}  // namespace

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

LaunchEnv read_launch_env(const EnvLookup& env, bool allow_single_process) {
  LaunchEnv out;
  const bool has_rank = env("RANK").has_value();
  const bool has_world = env("WORLD_SIZE").has_value();
  if (!has_rank && !has_world) {
    if (!allow_single_process) {
      throw Error(-1, kOp,
                  "RANK and WORLD_SIZE are not set: run this program under a launcher "
                  "(ddprun --standalone --nproc_per_node N --no_python <program>, or torchrun), "
                  "or set InitOptions::allow_single_process to run as a world of size 1");
    }
    out.from_launcher = false;
    return out;
  }
  if (!has_rank || !has_world) {
    throw Error(-1, kOp,
                std::string(has_rank ? "WORLD_SIZE" : "RANK") + " is not set although " +
                    (has_rank ? "RANK" : "WORLD_SIZE") +
                    " is: the launcher environment is incomplete");
  }
  out.rank = parse_int(env, "RANK", 0, 0);
  out.world_size = parse_int(env, "WORLD_SIZE", 1, 1);
  if (out.rank >= out.world_size) {
    throw Error(out.rank, kOp,
                "RANK=" + std::to_string(out.rank) +
                    " is not below WORLD_SIZE=" + std::to_string(out.world_size));
  }
  out.local_rank = parse_int(env, "LOCAL_RANK", out.rank, 0);
  out.local_world_size = parse_int(env, "LOCAL_WORLD_SIZE", out.world_size, 1);
  out.group_rank = parse_int(env, "GROUP_RANK", 0, 0);
  out.master_addr = env("MASTER_ADDR").value_or("127.0.0.1");
  if (out.world_size > 1 && !env("MASTER_PORT")) {
    throw Error(out.rank, kOp, "MASTER_PORT is not set but WORLD_SIZE > 1");
  }
  const int port = parse_int(env, "MASTER_PORT", 0, 0);
  if (port > 65535) throw Error(out.rank, kOp, "MASTER_PORT=" + std::to_string(port) + " > 65535");
  out.master_port = static_cast<std::uint16_t>(port);
  out.restart_count = parse_int(env, "TORCHELASTIC_RESTART_COUNT", 0, 0);
  out.max_restarts = parse_int(env, "TORCHELASTIC_MAX_RESTARTS", 0, 0);
  out.run_id = env("TORCHELASTIC_RUN_ID").value_or("");
  out.use_agent_store = parse_bool(env, "TORCHELASTIC_USE_AGENT_STORE");
  return out;
}

}  // namespace ddp
