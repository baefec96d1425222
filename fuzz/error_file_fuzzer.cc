// torchrun's error file (TORCHELASTIC_ERROR_FILE), which a worker writes and the agent reads
// with load_error_file() into the failure report it prints. load_error_file() takes a path,
// so the input is written to a file first (no seam in agent/). The first byte picks how the
// worker ended (exit code, killed or stopped by a signal); the rest is the file.
//
// Properties: nothing throws or crashes; the file counts as written; a message given as a
// string is the report's message; the report renders.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/failure_report.h"
#include "fuzz/fuzz_check.h"

using namespace ddprun;
using namespace ddprun::agent;

namespace {

std::string error_file_path;  // in a private directory made at start, removed at exit

void remove_error_file() {
  ::unlink(error_file_path.c_str());
  ::rmdir(error_file_path.substr(0, error_file_path.rfind('/')).c_str());
}

void write_error_file(const uint8_t* data, size_t size) {
  const int fd = ::open(error_file_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  FUZZ_CHECK(fd >= 0);
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd, data + done, size - done);
    FUZZ_CHECK(n > 0);
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

ExitStatus exit_of(uint8_t how) {
  switch (how % 3) {
    case 0:
      return ExitStatus::exited(how / 3);
    case 1:
      return ExitStatus::killed(how / 3 % 65);
    default:
      return ExitStatus::stopped_by(how / 3 % 65);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/ddprun_fuzz_XXXXXX";
  FUZZ_CHECK(::mkdtemp(dir.data()) != nullptr);
  error_file_path = dir + "/error.json";
  std::atexit(remove_error_file);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  write_error_file(data + 1, size - 1);
  WorkerFailure f;
  f.pid = 4242;
  f.exit = exit_of(data[0]);
  f.error_file = error_file_path;
  load_error_file(f);
  FUZZ_CHECK(f.error_file_written);

  const auto doc = nlohmann::json::parse(data + 1, data + size, nullptr, false);
  if (doc.is_object() && doc.contains("message") && doc["message"].is_string()) {
    FUZZ_CHECK(f.error_message == doc["message"].get<std::string>());
  }
  FailureReport report;
  report.entrypoint = "train.py";
  report.failures.push_back(f);
  FUZZ_CHECK(!report.render().empty());
  return 0;
}
