#include "agent/progress/rank_activity.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string_view>
#include <vector>

namespace ddprun::agent {
namespace {

constexpr std::string_view kSdkWaiting = "*** ddp: waiting in a collective (";
constexpr std::string_view kSdkNotWaiting = "*** ddp: not in a collective";
constexpr std::string_view kFaulthandlerStart = "Fatal Python error:";
constexpr std::string_view kTracebackStart = "Traceback (most recent call last):";

struct Frame {
  std::string path;
  std::string line;
  std::string function;
};

// torch 2.x prints an uncaught exception of a distributed rank line by line behind "[rank3]: ".
std::string_view without_rank_prefix(std::string_view line) {
  constexpr std::string_view kRank = "[rank";
  if (!line.starts_with(kRank)) return line;
  const auto digits_end = line.find_first_not_of("0123456789", kRank.size());
  if (digits_end == kRank.size() || digits_end == std::string_view::npos ||
      line.substr(digits_end, 2) != "]:") {
    return line;
  }
  line.remove_prefix(digits_end + 2);
  if (line.starts_with(" ")) line.remove_prefix(1);
  return line;
}

// `  File "<path>", line <n> in <func>` (faulthandler) or `  File "<path>", line <n>, in <func>`
// (a traceback).
std::optional<Frame> parse_frame(std::string_view text) {
  constexpr std::string_view kFile = "  File \"";
  if (!text.starts_with(kFile)) return std::nullopt;
  text.remove_prefix(kFile.size());
  const auto quote = text.find("\", line ");
  if (quote == std::string_view::npos) return std::nullopt;
  Frame frame;
  frame.path = std::string(text.substr(0, quote));
  text.remove_prefix(quote + 8);
  const auto digits_end = text.find_first_not_of("0123456789");
  if (digits_end == 0 || digits_end == std::string_view::npos) return std::nullopt;
  frame.line = std::string(text.substr(0, digits_end));
  text.remove_prefix(digits_end);
  if (text.starts_with(",")) text.remove_prefix(1);
  if (!text.starts_with(" in ")) return std::nullopt;
  text.remove_prefix(4);
  while (!text.empty() && (text.back() == '\r' || text.back() == ' ')) text.remove_suffix(1);
  frame.function = std::string(text);
  return frame;
}

bool is_collective_frame(const Frame& f) {
  const std::string_view path = f.path;
  if (path.find("/torch/distributed/") != std::string_view::npos) {
    return path.find("/torch/distributed/elastic/") == std::string_view::npos;
  }
  if (path.ends_with("/torch/nn/parallel/distributed.py")) return true;
  const bool autograd = path.find("/torch/autograd/") != std::string_view::npos ||
                        path.ends_with("/torch/_tensor.py");
  return autograd && f.function.find("backward") != std::string::npos;
}

std::string describe(const Frame& f) {
  const auto slash = f.path.rfind('/');
  const std::string base = slash == std::string::npos ? f.path : f.path.substr(slash + 1);
  return f.function + " at " + base + ":" + f.line;
}

// ddprun's own code in a Python worker (agent/python/: the bootstrap, its progress hooks; the
// preload template below them in a forked worker) is not
// what the rank was doing: a rank stopped while the bootstrap printed its exception, or inside a
// hook's bookkeeping, shows those frames on top of its own.
bool is_ddprun_frame(const Frame& f) {
  return f.path.ends_with("/_ddprun_bootstrap.py") || f.path.ends_with("/_ddprun_progress.py") ||
         (f.path.find("/ddprun-preload-") != std::string::npos &&
          f.path.ends_with("/template.py"));  // the preload template (preload_launcher.h)
}

ActivityFinding from_frame(const std::optional<Frame>& innermost) {
  if (!innermost) return {};
  return {is_collective_frame(*innermost) ? RankActivity::kInCollective : RankActivity::kElsewhere,
          describe(*innermost)};
}

// The bootstrap's functions that run the rank's script: what they call is the rank's own code.
bool runs_the_script(const Frame& f) {
  return f.path.ends_with("/_ddprun_bootstrap.py") &&
         (f.function == "_run_script" || f.function == "_run_module_as_main");
}

// The frame that shows what the rank itself was doing, from one thread's frames (innermost
// first): the innermost that is not ddprun's own. Except when the innermost of ddprun's is the
// bootstrap outside the script (handling the exception that ended it, exiting) or the preload
// template: what that called (the standard library) is not the rank's, and nothing of the
// rank's is left on the stack. A progress hook's callees are the rank's: its collective
// wrappers call the collective the script called.
std::optional<Frame> rank_frame(const std::vector<Frame>& frames) {
  auto own = std::find_if(frames.begin(), frames.end(), is_ddprun_frame);
  const bool outside_the_script =
      own != frames.end() && !runs_the_script(*own) && !own->path.ends_with("/_ddprun_progress.py");
  auto rank =
      std::find_if_not(outside_the_script ? own : frames.begin(), frames.end(), is_ddprun_frame);
  if (rank == frames.end()) return std::nullopt;
  return *rank;
}

// Whether the rank's innermost frames, ddprun's own above its first, hold a progress hook's
// collective wrapper: the rank was at the collective its script called, caught in the wrapper's
// bookkeeping just before or after it. A rank whose collective failed as its peers were stopped
// unwinds through there, and the stop can land at that moment (seen in CI: rank 0's barrier
// failed when the hung rank's node stopped its ranks first, and its stack showed end_waiting).
bool in_collective_wrapper(const std::vector<Frame>& frames) {
  for (const Frame& f : frames) {
    if (!is_ddprun_frame(f)) return false;
    if (f.path.ends_with("/_ddprun_progress.py") && f.function == "wrapper") return true;
  }
  return false;
}

// faulthandler lists each thread's frames innermost first, newest thread first: the main
// thread's block comes last.
ActivityFinding read_faulthandler(const std::vector<std::string>& lines, std::size_t from) {
  std::vector<Frame> block;
  bool in_block = false;
  for (std::size_t i = from + 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    // The dump ends before its extension list or the next dump.
    if (line.starts_with("Extension modules:") || line.starts_with(kFaulthandlerStart)) break;
    if ((line.starts_with("Thread 0x") || line.starts_with("Current thread 0x")) &&
        line.find("(most recent call first):") != std::string_view::npos) {
      in_block = true;
      block.clear();  // the last block (the main thread) decides, even when empty
      continue;
    }
    if (!in_block) continue;
    if (auto frame = parse_frame(line)) {
      block.push_back(std::move(*frame));
    } else if (!line.starts_with("  ")) {
      in_block = false;  // a blank line ends the block
    }
  }
  ActivityFinding finding = from_frame(rank_frame(block));
  if (finding.activity == RankActivity::kElsewhere && in_collective_wrapper(block)) {
    finding.activity = RankActivity::kInCollective;
  }
  return finding;
}

// "RuntimeError: ...", "torch.distributed.DistBackendError", "KeyboardInterrupt": the line that
// ends a whole traceback. A traceback cut short (the process was stopped while printing it)
// ends with something else, such as "Fatal Python error: Aborted".
bool exception_line(std::string_view line) {
  const std::string_view name = line.substr(0, line.find(':'));
  if (name.empty()) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  }
  return true;
}

// A traceback lists frames outermost first: the innermost is the last before the exception.
// One cut short says nothing reliable about where the rank was.
ActivityFinding read_traceback(const std::vector<std::string>& lines, std::size_t from) {
  std::optional<Frame> innermost;
  for (std::size_t i = from + 1; i < lines.size(); ++i) {
    if (auto frame = parse_frame(lines[i])) {
      if (!is_ddprun_frame(*frame)) innermost = frame;
    } else if (!lines[i].starts_with(" ")) {
      return exception_line(lines[i]) ? from_frame(innermost) : ActivityFinding{};
    }
  }
  return {};  // no exception line yet: cut short
}

}  // namespace

const char* activity_name(RankActivity activity) {
  switch (activity) {
    case RankActivity::kInCollective:
      return "in a collective";
    case RankActivity::kElsewhere:
      return "elsewhere";
    case RankActivity::kStopping:
      return "stopping";
    case RankActivity::kUnreadable:
      return "unreadable";
    case RankActivity::kUnknown:
      break;
  }
  return "unknown";
}

ActivityFinding read_activity(const std::vector<std::string>& raw) {
  std::vector<std::string> lines;
  lines.reserve(raw.size());
  for (const std::string& line : raw) lines.emplace_back(without_rank_prefix(line));
  // The latest readable evidence wins, with one exception: a traceback ending inside
  // torch.distributed means the rank's collective failed (its peer went away); whatever it
  // printed afterwards (a stack taken during its teardown) does not make it a culprit.
  std::optional<ActivityFinding> latest;
  for (std::size_t i = lines.size(); i-- > 0;) {
    const std::string_view line = lines[i];
    ActivityFinding found;
    if (line.starts_with(kSdkWaiting)) {
      std::string_view name = line.substr(kSdkWaiting.size());
      if (const auto close = name.rfind(')'); close != std::string_view::npos) {
        name = name.substr(0, close);
      }
      found = {RankActivity::kInCollective, std::string(name)};
    } else if (line.starts_with(kSdkNotWaiting)) {
      found = {RankActivity::kElsewhere, ""};
    } else if (line.starts_with(kFaulthandlerStart)) {
      found = read_faulthandler(lines, i);
    } else if (line.starts_with(kTracebackStart)) {
      found = read_traceback(lines, i);
      if (found.activity == RankActivity::kInCollective) return found;
    } else {
      continue;
    }
    if (!latest && found.activity != RankActivity::kUnreadable) latest = found;
  }
  return latest.value_or(ActivityFinding{});
}

}  // namespace ddprun::agent
