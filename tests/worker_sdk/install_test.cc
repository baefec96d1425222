// The SDK as users get it: `cmake --install` into a temp prefix, then a project outside the
// tree built with find_package(ddprun) (and once more with pkg-config), run under ddprun.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "tests/worker_sdk/multiproc.h"

namespace ddp_test {
namespace {

namespace fs = std::filesystem;

// Runs one command to completion (bounded); fails the test with its output otherwise.
std::string step(const std::string& what, const fs::path& log_dir, std::vector<std::string> argv,
                 std::map<std::string, std::string> env = {}) {
  ProcessSpec spec;
  spec.argv = std::move(argv);
  spec.env = std::move(env);
  spec.output_file = log_dir / (what + ".log");
  RunOptions options;
  options.deadline = std::chrono::seconds(180);
  auto results = run_processes({spec}, options);
  EXPECT_TRUE(results[0].ok()) << what << ": " << results[0].describe() << "\n"
                               << results[0].output;
  return results[0].output;
}

std::set<std::string> files_under(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) out.insert(fs::relative(entry.path(), dir).string());
  }
  return out;
}

std::vector<std::string> split(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

std::vector<std::string> split_on(const std::string& text, char separator) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, separator);) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

TEST(InstallTest, AnOutsideProjectBuildsAgainstTheInstalledSdkAndRunsUnderDdprun) {
  TempDir dir;
  const fs::path prefix = dir.path() / "prefix";
  step("install", dir.path(),
       {CMAKE_COMMAND_PATH, "--install", DDPRUN_BINARY_DIR, "--component", "worker_sdk", "--prefix",
        prefix.string()});
  ASSERT_FALSE(HasFailure());

  // Exactly the public headers, the library, the CMake package and the pkg-config file.
  EXPECT_EQ(files_under(prefix / "include"), [] {
    std::set<std::string> headers;
    for (const auto& f : files_under(fs::path(DDPRUN_SOURCE_DIR) / "worker_sdk/include")) {
      headers.insert(f);
    }
    return headers;
  }());
  // The configured libdir: lib, or Debian's multiarch lib/<triplet> for a /usr prefix.
  const fs::path libdir = prefix / INSTALL_LIBDIR;
  const auto lib = files_under(libdir);
  for (const char* f : {"libddprun_worker_sdk.so", "cmake/ddprun/ddprunConfig.cmake",
                        "cmake/ddprun/ddprunConfigVersion.cmake",
                        "cmake/ddprun/ddprunTargets.cmake", "pkgconfig/ddprun.pc"}) {
    EXPECT_TRUE(lib.count(f) || fs::exists(libdir / f)) << f;
  }

  // The user's project lives outside the tree: a copy in the temp dir.
  const fs::path source = dir.path() / "consumer";
  fs::copy(CONSUMER_SOURCE_DIR, source, fs::copy_options::recursive);
  const fs::path build = dir.path() / "build";
  // As a user of a LibTorch outside the default paths configures: its prefix too (TorchConfig
  // finds its Caffe2 part through CMAKE_PREFIX_PATH before its own directory).
  std::vector<std::string> configure = {
      CMAKE_COMMAND_PATH,
      "-S",
      source.string(),
      "-B",
      build.string(),
      "-G",
      "Ninja",
      "-DCMAKE_BUILD_TYPE=Release",
      "-DCMAKE_CXX_COMPILER=" CXX_COMPILER_PATH,
      "-DCMAKE_PREFIX_PATH=" + prefix.string() + ";" + CONSUMER_TORCH_PREFIX};
  for (const auto& arg : split_on(CONSUMER_CMAKE_ARGS, '|')) configure.push_back(arg);
  step("configure", dir.path(), configure);
  step("build", dir.path(), {CMAKE_COMMAND_PATH, "--build", build.string()});
  ASSERT_FALSE(HasFailure());
  const std::vector<std::string> ddprun = {DDPRUN_BINARY, "--standalone", "--nproc_per_node", "2",
                                           "--no_python"};
  auto with = [&](std::vector<std::string> head, const std::string& program) {
    head.push_back(program);
    return head;
  };
  const std::string out = step("run", dir.path(), with(ddprun, (build / "consumer").string()),
                               {{"OMP_NUM_THREADS", "1"}, {"TMPDIR", dir.path().string()}});
  EXPECT_NE(out.find("consumer: sum 3 on 2 ranks"), std::string::npos) << out;

  // pkg-config: the same program from a plain compiler command line.
  const std::map<std::string, std::string> pc_env = {
      {"PKG_CONFIG_PATH", (libdir / "pkgconfig").string()}};
  const std::string flags = step("pkg-config", dir.path(),
                                 {"/usr/bin/pkg-config", "--cflags", "--libs", "ddprun"}, pc_env);
  std::vector<std::string> compile = {CXX_COMPILER_PATH,
                                      "-std=c++17",
                                      "-O1",
                                      (source / "main.cc").string(),
                                      "-o",
                                      (dir.path() / "consumer_pc").string()};
  for (auto& f : split(flags)) compile.push_back(f);
  step("compile", dir.path(), compile);
  ASSERT_FALSE(HasFailure());
  const std::string pc_out =
      step("run_pc", dir.path(), with(ddprun, (dir.path() / "consumer_pc").string()),
           {{"OMP_NUM_THREADS", "1"}, {"LD_LIBRARY_PATH", libdir.string()}});
  EXPECT_NE(pc_out.find("consumer: sum 3 on 2 ranks"), std::string::npos) << pc_out;
}

}  // namespace
}  // namespace ddp_test
