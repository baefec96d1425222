// The failure summary ddprun prints when a worker group fails: torchrun's layout (entry point
// FAILED, Failures, Root Cause), plus the worker's error-file message and its last stderr lines.
// A report serializes to JSON so that, across nodes, every agent prints the same one.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/process/exit_status.h"
#include "common/clock.h"

namespace ddprun::agent {

struct WorkerFailure {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;
  ExitStatus exit;
  std::string time;  // "2026-01-01_12:34:56": when it was observed
  std::string hostname;
  std::string error_file;                // TORCHELASTIC_ERROR_FILE given to the worker
  bool error_file_written = false;       // whether the worker wrote it
  std::string error_message;             // the error file's message ("<Type>: <text>")
  std::string traceback;                 // the error file's traceback, or torchrun's placeholder
  std::vector<std::string> stderr_tail;  // last stderr lines, when stderr was captured
  // It made no progress for --hang_timeout (error_message says so); it was stopped with
  // SIGABRT so that it printed its stack.
  bool hung = false;
};

struct FailureReport {
  std::string entrypoint;               // e.g. "train.py"
  std::vector<WorkerFailure> failures;  // in the order observed; front() is the root cause
  // A cause outside the workers (the node hosting the rendezvous was lost): when set it is the
  // root cause, printed as such, and every worker failure is listed as a consequence.
  std::string cause;
  // The workers' Python and how it was chosen, printed under the title: a ModuleNotFoundError
  // then says which interpreter lacked the module. Empty: not a Python entry point.
  std::string interpreter;
  // Non-empty: this failure must not be restarted, and why (a rank asked to stop the job, or
  // attempts kept failing without progress: "3 attempts in a row failed at step 1234: not
  // restarting"). The coordinator then ends the job at once; printed under the title.
  std::string not_restartable;

  const WorkerFailure& root_cause() const { return failures.front(); }
  // What ddprun exits with: kExitDoNotRequeue (79) for a failure that must not be restarted,
  // else the root cause's exit code, or 128 + signal.
  int exit_code() const;
  // The summary, framed by '=' lines, ending with a newline.
  std::string render() const;
};

// Fills error_file_written / error_message / traceback from the worker's error file (torchrun's
// JSON: {"message": {"message": ..., "extraInfo": {"py_callstack": ..., "timestamp": ...}}} or
// {"message": "<text>"}), and the signal placeholder when the worker was killed.
void load_error_file(WorkerFailure& failure);

// Up to `max_lines` last lines of the file at `path` (reads at most its last 64 KiB).
std::vector<std::string> read_last_lines(const std::string& path, std::size_t max_lines);

void to_json(nlohmann::json& j, const WorkerFailure& f);
void from_json(const nlohmann::json& j, WorkerFailure& f);
void to_json(nlohmann::json& j, const FailureReport& r);
void from_json(const nlohmann::json& j, FailureReport& r);

}  // namespace ddprun::agent
