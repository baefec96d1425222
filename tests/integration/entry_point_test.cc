// Entry points: a Python script with its arguments passed through untouched (flag-like ones
// too), a module (-m), and an executable (--no_python).
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "tests/integration/ddprun_fixture.h"

namespace ddprun::testing {
namespace {

using Args = std::vector<std::string>;

class EntryPointTest : public DdprunTest {
 protected:
  Args recorded_args(const std::string& file) {
    const std::string text = read_text_file(out(file));
    if (text.empty()) return {"<no " + file + ">"};
    return nlohmann::json::parse(text).get<Args>();
  }
};

// Arguments after the script that look like ddprun's own flags, and "--", go to the script.
const Args kTrickyArgs = {
    "--lr", "1",         "-x", "--nproc_per_node", "5", "--", "--max_restarts=3",
    "",     "two words", "-m", "--no_python"};

TEST_F(EntryPointTest, ArgumentsAfterTheScriptReachItUntouched) {
  Args args = {"--nproc_per_node", "2", worker("echo_args.py")};
  args.insert(args.end(), kTrickyArgs.begin(), kTrickyArgs.end());
  const RunResult run = run_ddprun(args);
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_EQ(recorded_args("args_0.json"), kTrickyArgs);
  EXPECT_EQ(recorded_args("args_1.json"), kTrickyArgs);
}

TEST_F(EntryPointTest, DoubleDashSeparatesTheScript) {
  Args args = {"--nproc_per_node", "1", "--", worker("echo_args.py")};
  args.insert(args.end(), kTrickyArgs.begin(), kTrickyArgs.end());
  const RunResult run = run_ddprun(args);
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_EQ(recorded_args("args_0.json"), kTrickyArgs);
}

TEST_F(EntryPointTest, ScriptWithoutArguments) {
  const RunResult run = run_ddprun({worker("echo_args.py")});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_EQ(recorded_args("args_0.json"), Args{});
}

TEST_F(EntryPointTest, ModuleEntryPointRunsWithPythonDashM) {
  const std::string modules = temp() / "modules";
  ASSERT_EQ(::mkdir(modules.c_str(), 0755), 0);
  write_text_file(modules + "/ddprun_it_module.py",
                  "import json, os, sys\n"
                  "out = os.path.join(os.environ['DDPRUN_TEST_OUT'], "
                  "'module_' + os.environ['LOCAL_RANK'] + '.json')\n"
                  "with open(out + '.tmp', 'w') as f:\n"
                  "    json.dump([__name__] + sys.argv[1:], f)\n"
                  "os.rename(out + '.tmp', out)\n");
  env_["PYTHONPATH"] = modules;
  const RunResult run =
      run_ddprun({"--nproc_per_node", "2", "-m", "ddprun_it_module", "--lr", "1", "-m", "x"});
  ASSERT_TRUE(ExitedWith(run, 0));
  const Args expected = {"__main__", "--lr", "1", "-m", "x"};
  EXPECT_EQ(recorded_args("module_0.json"), expected);
  EXPECT_EQ(recorded_args("module_1.json"), expected);
}

TEST_F(EntryPointTest, NoPythonRunsAnExecutableScript) {
  const RunResult run =
      run_ddprun({"--nproc_per_node", "2", "--no_python", worker("record_args.sh"), "--lr", "a b"});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_EQ(read_text_file(out("sh_0")), "rank=0\narg=--lr\narg=a b\n");
  EXPECT_EQ(read_text_file(out("sh_1")), "rank=1\narg=--lr\narg=a b\n");
}

TEST_F(EntryPointTest, NoPythonFindsTheExecutableOnPath) {
  const RunResult run =
      run_ddprun({"--no-python", "sh", "-c", "echo \"$RANK $0 $1\" > \"$DDPRUN_TEST_OUT/sh_c\"",
                  "zero", "--one"});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_EQ(read_text_file(out("sh_c")), "0 zero --one\n");
}

TEST_F(EntryPointTest, NoPythonExitCodeIsPassedThrough) {
  const RunResult run = run_ddprun({"--no_python", "/bin/sh", "-c", "exit 7"});
  EXPECT_TRUE(ExitedWith(run, 7));
  EXPECT_NE(run.err.find("/bin/sh FAILED"), std::string::npos) << run.err;
}

// Issue 22: a mistyped script used to start every worker, fail in Python and spend all of
// --max_restarts on it, exiting 2 as if the command line were wrong. It is now refused before
// any worker starts, with the path, the directory and the file the user most likely meant.
TEST_F(EntryPointTest, AScriptThatDoesNotExistIsRefusedBeforeAnyWorkerStarts) {
  write_text_file(temp().path() + "/train.py", "print('never run')\n");
  const RunResult run =
      run_ddprun({"--nproc_per_node", "2", "--max_restarts", "3", "trian.py", "--lr", "1"});
  ASSERT_TRUE(ExitedWith(run, 2)) << run.err;
  EXPECT_NE(run.err.find("the script 'trian.py' does not exist (in " + temp().path() +
                         ") (did you mean 'train.py'?); no worker was started"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("FAILED"), std::string::npos) << "a worker ran\n" << run.err;
  EXPECT_EQ(run.err.find("restarting"), std::string::npos) << run.err;
}

TEST_F(EntryPointTest, AnAbsoluteScriptPathThatDoesNotExistIsRefusedNamingIt) {
  const RunResult run = run_ddprun({"--nproc_per_node", "1", temp().path() + "/missing/run.py"});
  ASSERT_TRUE(ExitedWith(run, 2)) << run.err;
  EXPECT_NE(run.err.find("the script '" + temp().path() + "/missing/run.py' does not exist"),
            std::string::npos)
      << run.err;
}

TEST_F(EntryPointTest, ADirectoryWithoutMainIsRefusedAndOneWithMainRuns) {
  const std::string dir = temp().path() + "/app";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  RunResult run = run_ddprun({"--nproc_per_node", "1", "app"});
  ASSERT_TRUE(ExitedWith(run, 2)) << run.err;
  EXPECT_NE(run.err.find("the entry point 'app' is a directory without a __main__.py"),
            std::string::npos)
      << run.err;
  write_text_file(dir + "/__main__.py", "import sys\nsys.exit(0)\n");
  run = run_ddprun({"--nproc_per_node", "1", "app"});
  EXPECT_TRUE(ExitedWith(run, 0)) << run.err;
}

}  // namespace
}  // namespace ddprun::testing
