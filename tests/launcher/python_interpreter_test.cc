// Which Python runs the workers: PYTHON_EXEC, else the python3 beside ddprun (a virtual
// environment's bin/), else python3 on PATH. Real files in a temporary directory.
#include "launcher/python_interpreter.h"
#include "tests/support/temp_dir.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

class PythonInterpreterTest : public ::testing::Test {
 protected:
  ddprun::testing::TempDir temp_;  // tests/support
  void SetUp() override {
    root_ = temp_.path();
    fs::create_directories(root_ / "venv/bin");
    fs::create_directories(root_ / "path");
  }

  std::string executable(const fs::path& path) {
    std::ofstream(path) << "#!/bin/sh\n";
    ::chmod(path.c_str(), 0755);
    return path.string();
  }

  fs::path root_;
};

TEST_F(PythonInterpreterTest, ThePythonBesideDdprunComesBeforeThePath) {
  const std::string venv = executable(root_ / "venv/bin/python3");
  executable(root_ / "path/python3");
  auto choice = choose_python("", (root_ / "venv/bin").string(), (root_ / "path").string());
  ASSERT_TRUE(choice.ok()) << choice.error_message();
  EXPECT_EQ(choice->executable, venv);
  EXPECT_EQ(choice->argv0, venv);
}

TEST_F(PythonInterpreterTest, PythonExecWinsOverBoth) {
  executable(root_ / "venv/bin/python3");
  const std::string chosen = executable(root_ / "path/mypython");
  auto choice = choose_python("mypython", (root_ / "venv/bin").string(), (root_ / "path").string());
  ASSERT_TRUE(choice.ok()) << choice.error_message();
  EXPECT_EQ(choice->executable, chosen);
  EXPECT_EQ(choice->argv0, "mypython");
}

TEST_F(PythonInterpreterTest, WithoutOneBesideDdprunThePathDecides) {
  const std::string on_path = executable(root_ / "path/python3");
  auto choice = choose_python("", (root_ / "venv/bin").string(), (root_ / "path").string());
  ASSERT_TRUE(choice.ok()) << choice.error_message();
  EXPECT_EQ(choice->executable, on_path);
  EXPECT_EQ(choice->argv0, "python3");
  // A python3 beside ddprun that cannot be executed is not taken either.
  std::ofstream(root_ / "venv/bin/python3") << "not executable\n";
  choice = choose_python("", (root_ / "venv/bin").string(), (root_ / "path").string());
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->executable, on_path);
}

TEST_F(PythonInterpreterTest, NoneAnywhereIsAnErrorThatSaysWhatToDo) {
  auto choice = choose_python("", (root_ / "venv/bin").string(), (root_ / "path").string());
  ASSERT_FALSE(choice.ok());
  EXPECT_NE(choice.error_message().find("PYTHON_EXEC"), std::string::npos)
      << choice.error_message();
  auto missing = choose_python("nosuchpython", "", (root_ / "path").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error_message().find("nosuchpython"), std::string::npos)
      << missing.error_message();
}

TEST(OwnExecutableDir, IsTheDirectoryOfThisTestBinary) {
  EXPECT_TRUE(fs::exists(fs::path(own_executable_dir()) / "launcher_unit_tests"))
      << own_executable_dir();
}

}  // namespace
}  // namespace ddprun::launcher
