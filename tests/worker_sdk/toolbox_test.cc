// The DDP toolbox across real processes, each checked against one process or PyTorch:
// SyncBatchNorm, PowerSGD (accuracy, and PyTorch's own hook), uneven inputs (join), bucket
// rebuilding, heartbeats.
#include <gtest/gtest.h>

#include <fstream>

#include "ddp/ddp.h"
#include "tests/worker_sdk/multiproc.h"
#include "tests/worker_sdk/test_models.h"

namespace ddp_test {
namespace {

namespace fs = std::filesystem;

void expect_all_ok(const std::vector<ProcessResult>& results) {
  for (const auto& r : results) ASSERT_TRUE(r.ok()) << all_output(results);
}

void expect_close(const std::vector<torch::Tensor>& got, const std::vector<torch::Tensor>& want,
                  double atol) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(torch::allclose(got[i].to(torch::kDouble), want[i].to(torch::kDouble), 1e-4, atol))
        << "tensor " << i << " differs by "
        << (got[i].to(torch::kDouble) - want[i].to(torch::kDouble)).abs().max().item<double>();
  }
}

std::vector<torch::Tensor> load_tensors(const fs::path& file) {
  std::vector<torch::Tensor> out;
  torch::load(out, file.string());
  return out;
}

// One process, BatchNorm on the whole global batch.
std::vector<torch::Tensor> syncbn_reference(int world) {
  auto net = make_bn_net();
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < 3; ++step) {
    auto b = image_batch(step, world, kPerRank);
    optimizer.zero_grad();
    torch::nn::functional::cross_entropy(net->forward(b.x), b.y).backward();
    optimizer.step();
  }
  return state_of(*net);
}

void expect_syncbn_matches_one_process(int world) {
  TempDir dir;
  const auto out = dir.path() / "state.pt";
  auto results = run_ranks(SDK_TEST_WORKER, {"syncbn", "out=" + out.string()}, world, dir.path());
  expect_all_ok(results);
  const auto expected = syncbn_reference(world);
  // Running statistics included: SyncBatchNorm's are the global batch's.
  expect_close(load_tensors(out), expected, 1e-5);
  // Plain BatchNorm per rank would differ: the comparison can fail.
  EXPECT_FALSE(torch::allclose(expected[2], state_of(*make_bn_net())[2]));
}

TEST(SyncBatchNormTest, TwoRanksMatchOneProcessOnTheWholeBatch) {
  expect_syncbn_matches_one_process(2);
}

TEST(SyncBatchNormTest, ThreeRanksMatchOneProcessOnTheWholeBatch) {
  expect_syncbn_matches_one_process(3);
}

TEST(SyncBatchNormTest, ConvertRefusesABatchNormItCannotSwapAndNamesIt) {
  struct CustomImpl : torch::nn::Module {
    CustomImpl() : bn(register_module("bn", torch::nn::BatchNorm2d(4))) {}
    torch::Tensor forward(torch::Tensor x) { return bn(x); }
    torch::nn::BatchNorm2d bn;
  };
  torch::nn::Sequential model(torch::nn::Conv2d(3, 4, 3), std::make_shared<CustomImpl>());
  try {
    ddp::convert_sync_batchnorm(model);
    FAIL() << "converted a BatchNorm held by a custom module";
  } catch (const ddp::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'1.bn' is a BatchNorm inside a module"),
              std::string::npos)
        << e.what();
  }
}

TEST(PowerSgdTest, LowRankWithErrorFeedbackEndsCloseToFullPrecisionWithFewerBytes) {
  TempDir dir;
  auto results = run_ranks(SDK_TEST_WORKER, {"powersgd_accuracy"}, 2, dir.path());
  expect_all_ok(results);
  EXPECT_NE(results[0].output.find("PowerSGD rank 2: loss"), std::string::npos);
}

// The same initial weights and batches through PyTorch 1.13's own powerSGD_hook (Python DDP)
// and through the SDK: the final weights agree.
TEST(PowerSgdTest, MatchesPyTorchsPowerSgdHook) {
  if (!fs::exists(DDPRUN_TEST_PYTHON)) GTEST_SKIP() << "no " << DDPRUN_TEST_PYTHON;
  TempDir dir;
  constexpr int kWorld = 2, kSteps = 6, kBatch = 8;
  torch::manual_seed(21);
  auto net =
      torch::nn::Sequential(torch::nn::Linear(8, 32), torch::nn::ReLU(), torch::nn::Linear(32, 16),
                            torch::nn::ReLU(), torch::nn::Linear(16, 4));
  c10::List<at::Tensor> init;
  for (auto& p : net->parameters()) init.push_back(p.detach().clone());
  auto gen = at::detail::createCPUGenerator(77);
  c10::impl::GenericDict input(c10::StringType::get(), c10::AnyType::get());
  input.insert("init", init);
  input.insert("x", torch::randn({kSteps, kWorld * kBatch, 8}, gen));
  input.insert("y", torch::randint(0, 4, {kSteps, kWorld * kBatch}, gen, torch::kLong));
  const auto bytes = torch::pickle_save(c10::IValue(input));
  std::ofstream(dir.path() / "input.pt", std::ios::binary).write(bytes.data(), bytes.size());

  const std::string data = "data=" + (dir.path() / "input.pt").string();
  auto sdk = run_ranks(SDK_TEST_WORKER,
                       {"powersgd_torch", data, "out=" + (dir.path() / "sdk.pt").string()}, kWorld,
                       dir.path());
  expect_all_ok(sdk);
  fs::create_directories(dir.path() / "py");
  auto python = run_ranks(
      DDPRUN_TEST_PYTHON,
      {POWERSGD_REFERENCE, (dir.path() / "input.pt").string(), (dir.path() / "torch.pt").string()},
      kWorld, dir.path() / "py");
  expect_all_ok(python);
  auto read_pickle = [](const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(in)), {});
    std::vector<torch::Tensor> out;  // Python's list pickles as a generic list
    const c10::IValue loaded = torch::pickle_load(raw);
    for (const auto& v : loaded.toListRef()) out.push_back(v.toTensor());
    return out;
  };
  const auto from_sdk = read_pickle(dir.path() / "sdk.pt");
  const auto from_torch = read_pickle(dir.path() / "torch.pt");
  expect_close(from_sdk, from_torch, 1e-5);
  // Training moved the weights: agreeing on the initial ones would prove nothing.
  EXPECT_FALSE(torch::allclose(from_torch[0], init.get(0), 1e-3, 1e-3));
}

// Rank r has batches_of_rank(r) batches; joined ranks contribute zero gradients, averaged
// over the whole group as in PyTorch.
std::vector<torch::Tensor> join_reference(int world) {
  auto net = make_mixed_net();
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(kLearningRate));
  int most = 0;
  for (int r = 0; r < world; ++r) most = std::max(most, batches_of_rank(r));
  for (int step = 0; step < most; ++step) {
    optimizer.zero_grad();
    auto global = global_batch(step, world, kPerRank);
    torch::Tensor loss = torch::zeros({});
    for (int r = 0; r < world; ++r) {
      if (step >= batches_of_rank(r)) continue;
      auto b = rank_slice(global, r, kPerRank);
      loss = loss + torch::nn::functional::cross_entropy(net(b.x, false), b.y) / world;
    }
    loss.backward();
    optimizer.step();
  }
  return parameters_of(*net);
}

TEST(JoinTest, UnevenInputsEndWithoutTimeoutAndMatchOneProcess) {
  TempDir dir;
  const auto out = dir.path() / "weights.pt";
  RunOptions options;
  options.deadline = std::chrono::seconds(60);
  // A short collective timeout: without join the ranks that still train would wait for it.
  auto results = run_ranks(SDK_TEST_WORKER, {"join", "out=" + out.string(), "timeout_ms=15000"}, 3,
                           dir.path(), options);
  expect_all_ok(results);
  expect_close(load_tensors(out), join_reference(3), 1e-6);
}

TEST(BucketRebuildTest, BucketsFollowTheFirstIterationsReadyOrder) {
  for (const std::string view : {"0", "1"}) {
    TempDir dir;
    auto results = run_ranks(SDK_TEST_WORKER, {"rebuild", "view=" + view}, 2, dir.path());
    expect_all_ok(results);
  }
}

TEST(HeartbeatTest, DdpWritesEachSynchronisedStepPlusTheOffsetToEachRanksFile) {
  TempDir dir;
  auto results = run_ranks(SDK_TEST_WORKER, {"heartbeat"}, 2, dir.path(), {},
                           {{"DDPRUN_HEARTBEAT_FILE", (dir.path() / "heartbeat_{rank}").string()}});
  expect_all_ok(results);
  for (int r = 0; r < 2; ++r) {
    std::ifstream in(dir.path() / ("heartbeat_" + std::to_string(r)));
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, "104") << "rank " << r;
  }
}

}  // namespace
}  // namespace ddp_test
