// The copy a background save takes (worker_sdk/src/snapshot_state_copy.h): serialised after
// training went on, it loads exactly as the state did when it was taken, for each optimizer
// it knows; other optimizers are refused (the save then serialises on the training thread).
#include "snapshot_state_copy.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>

namespace ddp_test {
namespace {

using ddp::detail::StateCopy;
using MakeOptimizer =
    std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor> parameters)>;

// A child of a child, with a parameter of its own beside its child's.
struct InnerImpl : torch::nn::Module {
  InnerImpl()
      : fc(register_module("fc", torch::nn::Linear(8, 8))),
        scale(register_parameter("scale", torch::ones({8}))) {}
  torch::Tensor forward(const torch::Tensor& x) { return torch::tanh(fc(x)) * scale; }
  torch::nn::Linear fc;
  torch::Tensor scale;
};
TORCH_MODULE(Inner);

// Nested modules, a buffer-carrying child (BatchNorm) and a child without state.
torch::nn::Sequential make_model() {
  torch::manual_seed(3);
  return torch::nn::Sequential(torch::nn::Linear(5, 8), torch::nn::BatchNorm1d(8),
                               torch::nn::ReLU(), Inner(), torch::nn::Linear(8, 2));
}

void train_steps(torch::nn::Sequential& model, torch::optim::Optimizer& optimizer, int steps,
                 int seed) {
  torch::manual_seed(seed);
  for (int i = 0; i < steps; ++i) {
    auto x = torch::randn({6, 5});
    optimizer.zero_grad();
    model->forward(x).pow(2).sum().backward();
    optimizer.step();
  }
}

std::string bytes_of(const std::function<void(torch::serialize::OutputArchive&)>& write) {
  torch::serialize::OutputArchive archive;
  write(archive);
  std::string bytes;
  archive.save_to([&bytes](const void* data, std::size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  return bytes;
}

void load(const std::string& bytes, torch::nn::Sequential& model,
          torch::optim::Optimizer& optimizer) {
  torch::serialize::InputArchive archive;
  archive.load_from(bytes.data(), bytes.size());
  torch::serialize::InputArchive model_archive, optimizer_archive;
  archive.read("model", model_archive);
  model->load(model_archive);
  archive.read("optimizer", optimizer_archive);
  optimizer.load(optimizer_archive);
}

void expect_same_tensors(torch::nn::Sequential& a, torch::nn::Sequential& b) {
  auto pa = a->named_parameters(), pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& p : pa) EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
  auto ba = a->named_buffers(), bb = b->named_buffers();
  ASSERT_EQ(ba.size(), bb.size());
  for (const auto& buffer : ba) {
    EXPECT_TRUE(torch::equal(buffer.value(), bb[buffer.key()])) << buffer.key();
  }
}

class StateCopyTest : public ::testing::TestWithParam<std::pair<std::string, MakeOptimizer>> {};

TEST_P(StateCopyTest, LoadsAsTheStateWasWhenTakenThoughTrainingWentOn) {
  const MakeOptimizer& make = GetParam().second;
  auto live = make_model();
  auto live_optimizer = make(live->parameters());
  train_steps(live, *live_optimizer, 3, 11);

  // What a synchronous save writes at this moment, and the copy a background save takes.
  const std::string at_save = bytes_of([&](torch::serialize::OutputArchive& archive) {
    torch::serialize::OutputArchive m, o;
    live->save(m);
    archive.write("model", m);
    live_optimizer->save(o);
    archive.write("optimizer", o);
  });
  auto copy = StateCopy::take(*live, live_optimizer.get());
  ASSERT_TRUE(copy.has_value());

  train_steps(live, *live_optimizer, 2, 12);  // training goes on before the writer serialises
  const std::string from_copy =
      bytes_of([&](torch::serialize::OutputArchive& archive) { copy->write(archive); });

  auto expected = make_model();
  auto expected_optimizer = make(expected->parameters());
  load(at_save, expected, *expected_optimizer);
  auto restored = make_model();
  auto restored_optimizer = make(restored->parameters());
  load(from_copy, restored, *restored_optimizer);
  expect_same_tensors(restored, expected);
  // The optimizer's state too: the same next steps give the same weights, bit for bit.
  train_steps(expected, *expected_optimizer, 2, 13);
  train_steps(restored, *restored_optimizer, 2, 13);
  expect_same_tensors(restored, expected);
  // And they differ from the live model, which trained on (the copy was not a reference).
  EXPECT_FALSE(torch::equal(restored[0]->named_parameters()["weight"],
                            live[0]->named_parameters()["weight"]));
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, StateCopyTest,
    ::testing::Values(
        std::make_pair(std::string("SgdWithMomentum"),
                       MakeOptimizer([](std::vector<torch::Tensor> p) {
                         return std::make_unique<torch::optim::SGD>(
                             p, torch::optim::SGDOptions(0.05).momentum(0.9));
                       })),
        std::make_pair(std::string("AdamAmsgrad"), MakeOptimizer([](std::vector<torch::Tensor> p) {
                         return std::make_unique<torch::optim::Adam>(
                             p, torch::optim::AdamOptions(0.01).amsgrad(true));
                       })),
        std::make_pair(std::string("AdamW"), MakeOptimizer([](std::vector<torch::Tensor> p) {
                         return std::make_unique<torch::optim::AdamW>(
                             p, torch::optim::AdamWOptions(0.01));
                       })),
        std::make_pair(std::string("Adagrad"), MakeOptimizer([](std::vector<torch::Tensor> p) {
                         return std::make_unique<torch::optim::Adagrad>(
                             p, torch::optim::AdagradOptions(0.05));
                       })),
        std::make_pair(std::string("RmspropCentredWithMomentum"),
                       MakeOptimizer([](std::vector<torch::Tensor> p) {
                         return std::make_unique<torch::optim::RMSprop>(
                             p, torch::optim::RMSpropOptions(0.01).momentum(0.5).centered(true));
                       }))),
    [](const auto& info) { return info.param.first; });

// A subclass may save more than its base: not copied as the base would be.
class OwnAdam : public torch::optim::Adam {
 public:
  using torch::optim::Adam::Adam;
};

TEST(StateCopyRefusalTest, AnOptimizerItDoesNotKnowIsNotCopied) {
  auto model = make_model();
  torch::optim::LBFGS lbfgs(model->parameters(), torch::optim::LBFGSOptions(0.1));
  EXPECT_FALSE(StateCopy::take(*model, &lbfgs).has_value());
  OwnAdam own(model->parameters(), torch::optim::AdamOptions(0.01));
  EXPECT_FALSE(StateCopy::take(*model, &own).has_value());
  EXPECT_TRUE(StateCopy::take(*model, nullptr).has_value());
}

}  // namespace
}  // namespace ddp_test
