#include "agent/failure_report.h"

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace ddprun::agent {
namespace {

using ddprun::testing::TempDir;  // tests/support

// Writes `content` to `name` in `dir`; returns its path.
std::string write_file(const TempDir& dir, const std::string& name, const std::string& content) {
  const std::string path = dir / name;
  std::ofstream(path) << content;
  return path;
}

WorkerFailure failure(int rank, ExitStatus exit) {
  WorkerFailure f;
  f.local_rank = rank;
  f.rank = rank;
  f.pid = 100 + rank;
  f.exit = exit;
  f.time = "2026-01-01_00:00:00";
  f.hostname = "node-a";
  f.error_file = "/nonexistent/error.json";
  return f;
}

TEST(FailureReport, RendersTorchrunsLayout) {
  FailureReport r;
  r.entrypoint = "train.py";
  r.failures.push_back(failure(1, ExitStatus::exited(3)));
  const std::string text = r.render();
  EXPECT_NE(text.find("train.py FAILED"), std::string::npos);
  EXPECT_NE(text.find("Failures:\n  <NO_OTHER_FAILURES>"), std::string::npos);
  EXPECT_NE(text.find("Root Cause (first observed failure):\n[0]:"), std::string::npos);
  EXPECT_NE(text.find("  rank      : 1 (local_rank: 1)"), std::string::npos);
  EXPECT_NE(text.find("  exitcode  : 3 (pid: 101)"), std::string::npos);
  EXPECT_NE(text.find("  error_file: <N/A>"), std::string::npos);
  EXPECT_NE(text.find("To enable traceback see"), std::string::npos);
  EXPECT_NE(text.find(std::string(60, '=')), std::string::npos);
  EXPECT_EQ(r.exit_code(), 3);
}

TEST(FailureReport, OtherFailuresAreListedAndRootIsFirst) {
  FailureReport r;
  r.entrypoint = "x";
  r.failures = {failure(2, ExitStatus::exited(4)), failure(0, ExitStatus::exited(5))};
  const std::string text = r.render();
  const auto failures_at = text.find("Failures:\n[1]:");
  const auto root_at = text.find("Root Cause (first observed failure):\n[0]:");
  ASSERT_NE(failures_at, std::string::npos);
  ASSERT_NE(root_at, std::string::npos);
  EXPECT_NE(text.find("rank      : 2", root_at), std::string::npos);
  EXPECT_EQ(r.exit_code(), 4);
}

TEST(FailureReport, SignalDeathShowsNegativeCodeAndSignalName) {
  WorkerFailure f = failure(0, ExitStatus::killed(SIGKILL));
  load_error_file(f);
  FailureReport r{"train.py", {f}};
  const std::string text = r.render();
  EXPECT_NE(text.find("exitcode  : -9 (pid: 100)"), std::string::npos);
  EXPECT_NE(text.find("Signal 9 (SIGKILL) received by PID 100"), std::string::npos);
  EXPECT_EQ(r.exit_code(), 128 + 9);
}

TEST(FailureReport, ReadsTorchrunErrorFile) {
  TempDir dir;
  WorkerFailure f = failure(0, ExitStatus::exited(1));
  f.error_file = write_file(dir, "error.json", R"({"message": {"message": "RuntimeError: boom",
      "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  line 1\nRuntimeError: boom",
      "timestamp": "1700000000"}}})");
  load_error_file(f);
  EXPECT_TRUE(f.error_file_written);
  EXPECT_EQ(f.error_message, "RuntimeError: boom");
  const std::string text = FailureReport{"t.py", {f}}.render();
  EXPECT_NE(text.find("error_file: " + f.error_file), std::string::npos);
  EXPECT_NE(text.find("traceback : Traceback (most recent call last):\n    line 1"),
            std::string::npos);
}

TEST(FailureReport, ReadsPlainMessageErrorFile) {
  TempDir dir;
  WorkerFailure f = failure(0, ExitStatus::exited(1));
  f.error_file = write_file(dir, "error.json", R"({"message": "snapshot corrupt"})");
  load_error_file(f);
  EXPECT_EQ(f.error_message, "snapshot corrupt");
  EXPECT_EQ(f.traceback, "snapshot corrupt");
}

TEST(FailureReport, MalformedErrorFileIsReportedNotFatal) {
  TempDir dir;
  WorkerFailure f = failure(0, ExitStatus::exited(1));
  f.error_file = write_file(dir, "error.json", "{not json");
  load_error_file(f);
  EXPECT_TRUE(f.error_file_written);
  EXPECT_NE(f.error_message.find("not torchrun's JSON"), std::string::npos);
}

// Found by fuzz/error_file_fuzzer: the worker writes the error file, and a field of another
// type than torchrun's ({"message": {"message": {...}}}, a string as extraInfo) made
// json::value() throw out of load_error_file: the agent aborted instead of reporting.
TEST(FailureReport, FuzzErrorFileFieldsOfTheWrongTypeAreShownNotFatal) {
  TempDir dir;
  WorkerFailure f = failure(0, ExitStatus::exited(1));
  f.error_file = write_file(dir, "error.json", R"({"message": {"message": {"py_callstaCk": "x"},
      "extraInfo": "not an object"}})");
  load_error_file(f);
  EXPECT_TRUE(f.error_file_written);
  EXPECT_EQ(f.error_message, R"({"py_callstaCk":"x"})");
  EXPECT_EQ(f.traceback, f.error_message);

  WorkerFailure g = failure(0, ExitStatus::exited(1));
  g.error_file = write_file(dir, "error2.json", R"({"message": {"message": "boom", "extraInfo":
      {"py_callstack": 7}}})");
  load_error_file(g);
  EXPECT_EQ(g.error_message, "boom");
  EXPECT_EQ(g.traceback, "7");
  EXPECT_NE(FailureReport({"t.py", {f, g}}).render().find("boom"), std::string::npos);
}

TEST(FailureReport, StderrTailIsShown) {
  WorkerFailure f = failure(0, ExitStatus::exited(2));
  f.stderr_tail = {"line a", "line b"};
  const std::string text = FailureReport{"t.py", {f}}.render();
  EXPECT_NE(text.find("stderr    : (last 2 lines)\n    line a\n    line b"), std::string::npos);
}

// A ModuleNotFoundError means little without the interpreter that lacked the module.
TEST(FailureReport, NamesTheWorkersInterpreterUnderTheTitle) {
  FailureReport r;
  r.entrypoint = "train.py";
  r.interpreter = "/usr/local/bin/python3 (the python3 on PATH; PYTHON_EXEC is unset)";
  r.failures.push_back(failure(0, ExitStatus::exited(1)));
  EXPECT_NE(r.render().find("train.py FAILED\ninterpreter: /usr/local/bin/python3 (the python3 "
                            "on PATH; PYTHON_EXEC is unset)\n---"),
            std::string::npos)
      << r.render();
}

TEST(FailureReport, RoundTripsThroughJson) {
  FailureReport r{"t.py",
                  {failure(1, ExitStatus::killed(SIGTERM)), failure(0, ExitStatus::exited(2))}};
  r.failures[0].stderr_tail = {"x"};
  r.interpreter = "/usr/bin/python3 (PYTHON_EXEC)";
  nlohmann::json j = r;
  FailureReport back = j.get<FailureReport>();
  EXPECT_EQ(back.render(), r.render());
  EXPECT_EQ(back.exit_code(), 128 + SIGTERM);
}

TEST(ReadLastLines, KeepsOnlyTheLastLines) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 100; ++i) text += "line " + std::to_string(i) + "\n";
  auto lines = read_last_lines(write_file(dir, "log", text), 3);
  EXPECT_EQ(lines, (std::vector<std::string>{"line 97", "line 98", "line 99"}));
  EXPECT_TRUE(read_last_lines(dir.path() + "/missing", 3).empty());
}

TEST(SignalNames, ParseAndPrint) {
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_from_name("SIGINT"), SIGINT);
  EXPECT_EQ(signal_from_name("HUP"), SIGHUP);
  EXPECT_EQ(signal_from_name("15"), 15);
  EXPECT_EQ(signal_from_name("SIGNOPE"), 0);
  EXPECT_EQ(signal_from_name("999"), 0);
}

}  // namespace
}  // namespace ddprun::agent
