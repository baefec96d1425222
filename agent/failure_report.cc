#include "agent/failure_report.h"

#include <csignal>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/exit_codes.h"

namespace ddprun::agent {
namespace {

constexpr const char* kNoTraceback =
    "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html";
constexpr std::size_t kMaxReportWidth = 60;  // torchrun caps its frame at 60 columns

std::string indent_continuation(const std::string& text) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '\n') out += "  ";
  }
  return out;
}

std::string format_failure(std::size_t index, const WorkerFailure& f) {
  std::ostringstream s;
  s << "[" << index << "]:\n"
    << "  time      : " << f.time << "\n"
    << "  host      : " << f.hostname << "\n"
    << "  rank      : " << f.rank << " (local_rank: " << f.local_rank << ")\n"
    << "  exitcode  : " << f.exit.torchrun_code() << " (pid: " << f.pid << ")\n"
    << "  error_file: " << (f.error_file_written ? f.error_file : "<N/A>") << "\n"
    << "  traceback : " << indent_continuation(f.traceback.empty() ? kNoTraceback : f.traceback);
  if (!f.error_message.empty() && f.traceback.find(f.error_message) == std::string::npos) {
    s << "\n  message   : " << indent_continuation(f.error_message);
  }
  if (!f.stderr_tail.empty()) {
    s << "\n  stderr    : (last " << f.stderr_tail.size() << " lines)";
    for (const auto& line : f.stderr_tail) s << "\n    " << line;
  }
  return s.str();
}

std::size_t widest_line(const std::string& text) {
  std::size_t widest = 0, current = 0;
  for (char c : text) {
    current = c == '\n' ? 0 : current + 1;
    widest = std::max(widest, current);
  }
  return widest;
}

// `object[key]` as text: a string as it is, any other value as its JSON, "" when absent. The
// file is the worker's: a field of another type than torchrun writes must not throw (fuzzing
// found {"message": {"message": {...}}} aborting the agent through json::value()).
std::string text_member(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

}  // namespace

int FailureReport::exit_code() const {
  if (!not_restartable.empty()) return kExitDoNotRequeue;
  return failures.empty() ? 1 : root_cause().exit.shell_code();
}

std::string FailureReport::render() const {
  const std::string title = entrypoint + " FAILED";
  std::size_t width = title.size();
  std::string root_text;
  std::vector<std::string> others;
  if (!cause.empty()) {
    root_text = "  cause     : " + indent_continuation(cause);
    width = std::max(width, widest_line(root_text));
  }
  for (std::size_t i = 0; i < failures.size(); ++i) {
    std::string text = format_failure(i, failures[i]);
    width = std::max(width, widest_line(text));
    (i == 0 && cause.empty() ? root_text : others.emplace_back()) = std::move(text);
  }
  width = std::min(width, kMaxReportWidth);
  const std::string border(width, '='), section(width, '-');
  std::ostringstream s;
  s << "\n" << border << "\n" << title << "\n";
  if (!interpreter.empty()) s << "interpreter: " << interpreter << "\n";
  if (!not_restartable.empty()) s << "not restarted: " << not_restartable << "\n";
  s << section << "\nFailures:\n";
  if (others.empty()) s << "  <NO_OTHER_FAILURES>\n";
  for (const auto& o : others) s << o << "\n";
  s << section << "\nRoot Cause (first observed failure):\n" << root_text << "\n" << border << "\n";
  return s.str();
}

void load_error_file(WorkerFailure& f) {
  if (f.exit.stopped) {
    f.traceback = "Signal " + std::to_string(f.exit.signal) + " (" + signal_name(f.exit.signal) +
                  ") stopped PID " + std::to_string(f.pid) +
                  (f.exit.signal == SIGTTIN || f.exit.signal == SIGTTOU
                       ? ": it used the terminal from a background process group; workers get "
                         "/dev/null as stdin, read input another way"
                       : "") +
                  "; ddprun ended it (a stopped worker would hold the job forever)";
  } else if (f.exit.signal) {
    f.traceback = "Signal " + std::to_string(f.exit.signal) + " (" + signal_name(f.exit.signal) +
                  ") received by PID " + std::to_string(f.pid);
  }
  std::ifstream in(f.error_file);
  if (!in) return;
  f.error_file_written = true;
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("message")) {
    f.error_message = "(error file is not torchrun's JSON format)";
    return;
  }
  const nlohmann::json& message = doc["message"];
  if (message.is_string()) {
    f.error_message = message.get<std::string>();
    if (f.traceback.empty()) f.traceback = f.error_message;
    return;
  }
  if (!message.is_object()) return;
  f.error_message = text_member(message, "message");
  const auto extra = message.find("extraInfo");
  const std::string callstack =
      extra != message.end() && extra->is_object() ? text_member(*extra, "py_callstack") : "";
  if (f.traceback.empty()) f.traceback = !callstack.empty() ? callstack : f.error_message;
}

std::vector<std::string> read_last_lines(const std::string& path, std::size_t max_lines) {
  constexpr std::streamoff kMaxBytes = std::streamoff{64} * 1024;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || max_lines == 0) return {};
  const std::streamoff size = in.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - kMaxBytes);
  in.seekg(start);
  std::string data(static_cast<std::size_t>(size - start), '\0');
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  std::vector<std::string> lines;
  std::istringstream stream(data);
  std::string line;
  while (std::getline(stream, line)) lines.push_back(line);
  if (start > 0 && !lines.empty()) lines.erase(lines.begin());  // first line may be cut
  if (lines.size() > max_lines) {
    lines.erase(lines.begin(), lines.end() - static_cast<std::ptrdiff_t>(max_lines));
  }
  return lines;
}

void to_json(nlohmann::json& j, const WorkerFailure& f) {
  j = {{"local_rank", f.local_rank},
       {"rank", f.rank},
       {"pid", f.pid},
       {"exit_code", f.exit.code},
       {"signal", f.exit.signal},
       {"stopped", f.exit.stopped},
       {"time", f.time},
       {"hostname", f.hostname},
       {"error_file", f.error_file},
       {"error_file_written", f.error_file_written},
       {"error_message", f.error_message},
       {"traceback", f.traceback},
       {"stderr_tail", f.stderr_tail},
       {"hung", f.hung}};
}

void from_json(const nlohmann::json& j, WorkerFailure& f) {
  f.local_rank = j.value("local_rank", 0);
  f.rank = j.value("rank", 0);
  f.pid = j.value("pid", -1);
  f.exit.code = j.value("exit_code", 1);
  f.exit.signal = j.value("signal", 0);
  f.exit.stopped = j.value("stopped", false);
  f.hung = j.value("hung", false);
  f.time = j.value("time", std::string());
  f.hostname = j.value("hostname", std::string());
  f.error_file = j.value("error_file", std::string());
  f.error_file_written = j.value("error_file_written", false);
  f.error_message = j.value("error_message", std::string());
  f.traceback = j.value("traceback", std::string());
  f.stderr_tail = j.value("stderr_tail", std::vector<std::string>{});
}

void to_json(nlohmann::json& j, const FailureReport& r) {
  j = {{"entrypoint", r.entrypoint}, {"failures", r.failures}};
  if (!r.cause.empty()) j["cause"] = r.cause;
  if (!r.interpreter.empty()) j["interpreter"] = r.interpreter;
  if (!r.not_restartable.empty()) j["not_restartable"] = r.not_restartable;
}

void from_json(const nlohmann::json& j, FailureReport& r) {
  r.entrypoint = j.value("entrypoint", std::string());
  r.failures = j.value("failures", std::vector<WorkerFailure>{});
  r.cause = j.value("cause", std::string());
  r.interpreter = j.value("interpreter", std::string());
  r.not_restartable = j.value("not_restartable", std::string());
}

}  // namespace ddprun::agent
