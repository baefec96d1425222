#include "agent/process/process_inspector.h"

#include <fstream>
#include <iterator>
#include <sstream>

namespace ddprun::agent {
namespace {

// The whole (small) file, or "" when it cannot be read.
std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The names the kernel gives its task states (fs/proc/array.c, task_state_array).
const char* state_name(char state) {
  switch (state) {
    case 'R':
      return "running";
    case 'S':
      return "sleeping";
    case 'D':
      return "disk sleep";
    case 'T':
      return "stopped";
    case 't':
      return "tracing stop";
    case 'X':
      return "dead";
    case 'Z':
      return "zombie";
    case 'P':
      return "parked";
    case 'I':
      return "idle";
    case 'W':
      return "waking";
    case 'K':
      return "wakekill";
    default:
      return nullptr;
  }
}

}  // namespace

std::string ProcessSnapshot::describe() const {
  std::ostringstream s;
  s << "state " << (state.empty() ? "unknown" : state) << ", ";
  if (wchan.empty()) {
    s << "wait channel unknown";
  } else {
    s << "waiting in " << wchan;
  }
  s << ", command " << (command.empty() ? "unknown" : command);
  return s.str();
}

std::string describe_unkillable(pid_t pid, int local_rank, double waited_seconds,
                                const ProcessSnapshot& snapshot) {
  std::ostringstream s;
  s << "worker pid " << pid << " (local_rank " << local_rank << ") did not exit " << waited_seconds
    << " s after SIGKILL: " << snapshot.describe();
  return s.str();
}

std::string state_from_stat(const std::string& stat_line) {
  const auto close = stat_line.rfind(')');
  // ") D <ppid> ...": the state is the first field after the command name.
  if (close == std::string::npos || close + 2 >= stat_line.size()) return "";
  const char state = stat_line[close + 2];
  const char* name = state_name(state);
  return name ? std::string(1, state) + " (" + name + ")" : std::string(1, state);
}

std::string command_from_cmdline(const std::string& cmdline) {
  std::string command = cmdline;
  while (!command.empty() && command.back() == '\0') command.pop_back();
  for (char& c : command) {
    if (c == '\0') c = ' ';
  }
  return command;
}

std::string wchan_name(const std::string& wchan) {
  const auto first = wchan.find_first_not_of(" \t\n");
  if (first == std::string::npos) return "";
  const auto last = wchan.find_last_not_of(" \t\n");
  std::string name = wchan.substr(first, last - first + 1);
  return name == "0" ? "" : name;
}

ProcessSnapshot ProcInspector::inspect(pid_t pid) const {
  const std::string dir = "/proc/" + std::to_string(pid) + "/";
  ProcessSnapshot snapshot;
  snapshot.state = state_from_stat(read_file(dir + "stat"));
  snapshot.wchan = wchan_name(read_file(dir + "wchan"));
  snapshot.command = command_from_cmdline(read_file(dir + "cmdline"));
  return snapshot;
}

}  // namespace ddprun::agent
