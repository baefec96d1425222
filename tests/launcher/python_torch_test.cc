// Finding the torch a Python entry point imports, on fabricated interpreter layouts.
#include "launcher/python_torch.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

class PythonTorchTest : public ::testing::Test {
 protected:
  ddprun::testing::TempDir temp_;  // tests/support
  void SetUp() override { root_ = temp_.path(); }
  void torch_at(const fs::path& site, const std::string& version) {
    fs::create_directories(site / "torch");
    std::ofstream(site / "torch/version.py")
        << "__version__ = '" << version << "'\ndebug = False\n";
  }
  fs::path python_in(const fs::path& prefix) {
    fs::create_directories(prefix / "bin");
    std::ofstream(prefix / "bin/python3") << "";
    return prefix / "bin/python3";
  }
  fs::path root_;
};

TEST_F(PythonTorchTest, DebianLayout) {
  const auto python = python_in(root_ / "usr");
  torch_at(root_ / "usr/lib/python3/dist-packages", "1.13.0a0");
  EXPECT_EQ(find_torch_version(python.string(), {}), "1.13.0a0");
}

TEST_F(PythonTorchTest, VirtualEnvironmentWinsOverItsBaseAndPythonPathWinsOverBoth) {
  const auto base = python_in(root_ / "usr");
  torch_at(root_ / "usr/lib/python3/dist-packages", "1.13.0a0");
  const auto venv = python_in(root_ / "venv");
  std::ofstream(root_ / "venv/pyvenv.cfg")
      << "home = " << (root_ / "usr/bin").string() << "\ninclude-system-site-packages = true\n";
  EXPECT_EQ(find_torch_version(venv.string(), {}), "1.13.0a0");  // from the base
  torch_at(root_ / "venv/lib/python3.11/site-packages", "2.5.1+cu121");
  EXPECT_EQ(find_torch_version(venv.string(), {}), "2.5.1+cu121");
  torch_at(root_ / "dev", "2.7.0a0+git");
  EXPECT_EQ(find_torch_version(venv.string(), {{"PYTHONPATH", (root_ / "dev").string()}}),
            "2.7.0a0+git");
}

TEST_F(PythonTorchTest, NoTorchOrAWrapperGivesNothing) {
  EXPECT_FALSE(find_torch_version(python_in(root_ / "opt").string(), {}));
  EXPECT_FALSE(find_torch_version((root_ / "shims/python3").string(), {}));
}

TEST(TorchMajorVersion, ReadsTheLeadingNumber) {
  EXPECT_EQ(torch_major_version("1.13.0a0"), 1);
  EXPECT_EQ(torch_major_version("2.5.1+cu121"), 2);
  EXPECT_FALSE(torch_major_version("nightly"));
}

}  // namespace
}  // namespace ddprun::launcher
