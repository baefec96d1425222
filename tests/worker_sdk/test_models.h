// Models and data shared by the test worker (many ranks) and the tests' single-process
// references, so both sides compute on exactly the same things; and what the tests read back.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace ddp_test {

// Several parameter sizes, so small bucket caps give several buckets; `branch` is used only
// when asked (locally unused on some ranks), `never` is never used.
struct MixedNetImpl : torch::nn::Module {
  MixedNetImpl()
      : fc1(register_module("fc1", torch::nn::Linear(8, 32))),
        fc2(register_module("fc2", torch::nn::Linear(32, 16))),
        fc3(register_module("fc3", torch::nn::Linear(16, 4))),
        branch(register_module("branch", torch::nn::Linear(32, 4))),
        never(register_module("never", torch::nn::Linear(4, 4))) {}

  torch::Tensor forward(const torch::Tensor& x, bool use_branch) {
    auto h = torch::relu(fc1(x));
    auto out = fc3(torch::relu(fc2(h)));
    if (use_branch) out = out + branch(h);
    return out;
  }

  torch::nn::Linear fc1, fc2, fc3, branch, never;
};
TORCH_MODULE(MixedNet);

inline const std::vector<std::string>& mixed_net_unused_names() {
  static const std::vector<std::string> kNames = {"branch.weight", "branch.bias", "never.weight",
                                                  "never.bias"};
  return kNames;
}

inline MixedNet make_mixed_net() {
  torch::manual_seed(42);
  return MixedNet();
}

struct Batch {
  torch::Tensor x, y;
};

// The global batch number `index`: world_size * per_rank samples, deterministic.
inline Batch global_batch(int64_t index, int world_size, int per_rank) {
  auto gen = at::detail::createCPUGenerator(1000 + index);
  Batch b;
  b.x = torch::randn({world_size * per_rank, 8}, gen);
  b.y = torch::randint(0, 4, {world_size * per_rank}, gen, torch::kLong);
  return b;
}

inline Batch rank_slice(const Batch& b, int rank, int per_rank) {
  return {b.x.narrow(0, rank * per_rank, per_rank), b.y.narrow(0, rank * per_rank, per_rank)};
}

inline std::vector<torch::Tensor> parameters_of(torch::nn::Module& m) {
  std::vector<torch::Tensor> out;
  for (auto& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

// Uneven inputs (join): rank r trains on this many batches (3, 5, 4, 3, ...).
inline int batches_of_rank(int rank) { return 3 + (rank == 1 ? 2 : rank == 2 ? 1 : 0); }

// A small CNN with BatchNorm, for SyncBatchNorm: the worker converts it, the reference runs
// it as it is on the whole global batch.
inline torch::nn::Sequential make_bn_net() {
  torch::manual_seed(7);
  return torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3)),
                               torch::nn::BatchNorm2d(4), torch::nn::ReLU(), torch::nn::Flatten(),
                               torch::nn::Linear(4 * 4 * 4, 3));
}

// Global image batch `index` for make_bn_net: [world_size * per_rank, 3, 6, 6].
inline Batch image_batch(int64_t index, int world_size, int per_rank) {
  auto gen = at::detail::createCPUGenerator(2000 + index);
  Batch b;
  // Shifted and scaled, so that normalising with the wrong statistics would show.
  b.x = torch::randn({world_size * per_rank, 3, 6, 6}, gen) * 2.0 + 0.5;
  b.y = torch::randint(0, 3, {world_size * per_rank}, gen, torch::kLong);
  return b;
}

// Parameters, then buffers (running statistics), detached copies.
// Weights a test worker saved with torch::save (a vector of tensors).
inline std::vector<torch::Tensor> load_weights(const std::filesystem::path& file) {
  std::vector<torch::Tensor> out;
  torch::load(out, file.string());
  return out;
}

// The names in `dir`, sorted (snapshot files, say).
inline std::vector<std::string> sorted_names(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

inline std::vector<torch::Tensor> state_of(torch::nn::Module& m) {
  std::vector<torch::Tensor> out;
  for (auto& p : m.parameters()) out.push_back(p.detach().clone());
  for (auto& b : m.buffers()) out.push_back(b.detach().clone());
  return out;
}

// Training settings shared by worker and reference.
constexpr int kPerRank = 6;
constexpr double kLearningRate = 0.1;
constexpr double kMomentum = 0.9;
constexpr int kMicroBatches = 2;

}  // namespace ddp_test
