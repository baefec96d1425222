// The examples run as 2 real ranks and learn: min_ddp, and mnist on a small subset of
// Fashion-MNIST (top-1 well above chance after one short epoch, progress while it trains,
// outputs written by rank 0, which says where they are and how to resume).
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/worker_sdk/multiproc.h"

namespace ddp_test {
namespace {

namespace fs = std::filesystem;

TEST(ExamplesTest, MinDdpPrintsReducedLossAndGatheredAccuracyOnce) {
  TempDir dir;
  auto results = run_ranks(EXAMPLE_MIN_DDP, {}, 2, dir.path());
  for (const auto& r : results) ASSERT_TRUE(r.ok()) << all_output(results);
  EXPECT_NE(results[0].output.find("epoch 4  loss"), std::string::npos) << results[0].output;
  EXPECT_NE(results[0].output.find("over 2 ranks"), std::string::npos);
  EXPECT_EQ(results[1].output.find("epoch"), std::string::npos) << "rank 1 printed";
}

TEST(ExamplesTest, MnistLearnsOnASubsetAndWritesModelHistoryAndSnapshots) {
  const fs::path data = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(data / "train-images-idx3-ubyte.gz") &&
      !fs::exists(data / "train-images-idx3-ubyte")) {
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  }
  TempDir dir;
  const fs::path out = dir.path() / "out";
  RunOptions options;
  options.deadline = std::chrono::seconds(150);
  auto results = run_ranks(EXAMPLE_MNIST,
                           {"--epochs", "1", "--train_limit", "3000", "--test_limit", "1000",
                            "--out_dir", out.string(), "--lr", "0.05", "--progress_interval", "0"},
                           2, dir.path(), options);
  for (const auto& r : results) ASSERT_TRUE(r.ok()) << all_output(results);
  const std::string& primary = results[0].output;
  EXPECT_NE(primary.find("epoch 1/1"), std::string::npos) << primary;
  // Not a terminal: progress lines within the epoch, with throughput and running loss.
  EXPECT_NE(primary.find("epoch 1/1  step 1/"), std::string::npos) << primary;
  EXPECT_NE(primary.find("samples/s  running loss"), std::string::npos) << primary;
  EXPECT_EQ(primary.find('\r'), std::string::npos) << "a terminal bar in a log";
  EXPECT_EQ(results[1].output.find("samples/s"), std::string::npos) << "rank 1 printed progress";
  EXPECT_NE(primary.find("accuracy history  " + (out / "accuracy.json").string()),
            std::string::npos)
      << primary;
  EXPECT_NE(primary.find("snapshots         " + (out / "snapshots").string()), std::string::npos)
      << primary;
  EXPECT_NE(primary.find("same command with a larger --epochs:"), std::string::npos) << primary;
  EXPECT_NE(primary.find("--epochs 3"), std::string::npos) << primary;
  ASSERT_TRUE(fs::exists(out / "model.pt"));
  ASSERT_TRUE(fs::exists(out / "accuracy.json"));
  auto history = nlohmann::json::parse(std::ifstream(out / "accuracy.json"));
  ASSERT_EQ(history.size(), 1u);
  // 10 classes: chance is 10% top-1, 50% top-5.
  EXPECT_GT(history[0]["top1"].get<double>(), 0.6) << history.dump();
  EXPECT_GT(history[0]["top5"].get<double>(), 0.9) << history.dump();
  EXPECT_FALSE(fs::is_empty(out / "snapshots"));
}

}  // namespace
}  // namespace ddp_test
