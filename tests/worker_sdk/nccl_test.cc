// The SDK's NCCL path on a GPU (scenario tests/worker_sdk/worker/nccl.cc: collectives, DDP,
// SyncBatchNorm and snapshots on CUDA tensors). Skipped where the SDK was built without NCCL
// (Debian's LibTorch) or no CUDA device is visible (every CI machine);
// scripts/device-nccl-check.sh runs it on a GPU machine.
#include <gtest/gtest.h>

#include <torch/cuda.h>

#include "ddp/ddp.h"
#include "tests/worker_sdk/multiproc.h"

namespace ddp_test {
namespace {

void run_nccl(int world) {
  if (!ddp::nccl_available()) GTEST_SKIP() << "this SDK was built without NCCL";
  if (torch::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  TempDir dir;
  RunOptions options;
  options.deadline = std::chrono::seconds(120);  // CUDA contexts and NCCL communicators
  std::map<std::string, std::string> env;
  // More ranks than GPUs: NCCL refuses two ranks of a communicator on one device unless told.
  if (static_cast<int>(torch::cuda::device_count()) < world) {
    env["NCCL_MULTI_RANK_GPU_ENABLE"] = "1";
  }
  auto results = run_ranks(SDK_TEST_WORKER, {"nccl", "dir=" + (dir.path() / "snapshots").string()},
                           world, dir.path(), options, env);
  if (env.count("NCCL_MULTI_RANK_GPU_ENABLE") &&
      all_output(results).find("Duplicate GPU detected") != std::string::npos) {
    // NCCL before 2.30 (torch 2.11's 2.28, say) has no such switch.
    GTEST_SKIP() << "this NCCL refuses two ranks on one GPU (NCCL_MULTI_RANK_GPU_ENABLE=1 did "
                    "not help): needs more GPUs or a newer NCCL";
  }
  for (const auto& r : results) ASSERT_TRUE(r.ok()) << all_output(results);
  EXPECT_NE(results[0].output.find("nccl ok on " + std::to_string(world) + " ranks"),
            std::string::npos)
      << all_output(results);
}

TEST(NcclTest, OneRank) { run_nccl(1); }
TEST(NcclTest, TwoRanks) { run_nccl(2); }

}  // namespace
}  // namespace ddp_test
