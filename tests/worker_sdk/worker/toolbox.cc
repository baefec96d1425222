// SyncBatchNorm and PowerSGD across ranks.
#include <fstream>
#include <iostream>

#include "tests/worker_sdk/test_models.h"
#include "tests/worker_sdk/worker/worker.h"

namespace worker {
namespace {

using namespace ddp_test;

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), {});
}

void write_all(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct RunResult {
  double final_loss = 0;
  double initial_loss = 0;
  double bytes_per_step = 0;  // handed to the backend per step, after the warm-up
};

// A teacher-labelled classification task: each rank its own samples, one evaluation set.
RunResult train_mlp(const Group& g, std::shared_ptr<ddp::CommHook> hook, int warmup) {
  torch::manual_seed(11);
  auto net =
      torch::nn::Sequential(torch::nn::Linear(32, 64), torch::nn::ReLU(), torch::nn::Linear(64, 64),
                            torch::nn::ReLU(), torch::nn::Linear(64, 10));
  auto teacher = torch::randn({32, 10}, at::detail::createCPUGenerator(5));
  auto data = torch::randn({512, 32}, at::detail::createCPUGenerator(500 + g->rank()));
  auto labels = data.matmul(teacher).argmax(1);
  auto eval_x = torch::randn({1024, 32}, at::detail::createCPUGenerator(999));
  auto eval_y = eval_x.matmul(teacher).argmax(1);
  auto eval = [&] {
    torch::NoGradGuard no_grad;
    return torch::nn::functional::cross_entropy(net->forward(eval_x), eval_y).item<double>();
  };
  ddp::DdpOptions options;
  options.comm_hook = std::move(hook);
  ddp::DistributedDataParallel model(net, g, options);
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  RunResult result;
  result.initial_loss = eval();
  constexpr int kSteps = 60, kBatch = 32;
  ddp::CommCounters at_warmup{};
  for (int step = 0; step < kSteps; ++step) {
    if (step == warmup) at_warmup = g->counters();
    const int64_t start = (step * kBatch) % 512;
    optimizer.zero_grad();
    torch::nn::functional::cross_entropy(model(data.narrow(0, start, kBatch)),
                                         labels.narrow(0, start, kBatch))
        .backward();
    optimizer.step();
  }
  result.bytes_per_step =
      static_cast<double>(g->counters().bytes - at_warmup.bytes) / (kSteps - warmup);
  result.final_loss = eval();
  return result;
}

}  // namespace

// SyncBatchNorm (converted from BatchNorm2d in a Sequential) under DDP; rank 0 writes the
// parameters and running statistics for the comparison with one process on the whole batch.
int syncbn(Group g, const Args& args) {
  const int r = g->rank(), n = g->size();
  auto net = ddp::convert_sync_batchnorm(make_bn_net());
  CHECK_THAT(net[1]->as<ddp::SyncBatchNormImpl>() != nullptr, "BatchNorm2d was not converted");
  ddp::DistributedDataParallel model(net, g);
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < 3; ++step) {
    auto b = rank_slice(image_batch(step, n, kPerRank), r, kPerRank);
    optimizer.zero_grad();
    torch::nn::functional::cross_entropy(model(b.x), b.y).backward();
    optimizer.step();
  }
  check_same_on_all_ranks(*g, state_of(*net));
  if (g->is_primary()) torch::save(state_of(*net), arg(args, "out"));
  return 0;
}

// PowerSGD with a low rank and error feedback ends close to full-precision training, with
// a fraction of the bytes.
int powersgd_accuracy(Group g, const Args&) {
  constexpr int kWarmup = 10;
  const RunResult full = train_mlp(g, nullptr, kWarmup);
  ddp::PowerSgdOptions options;
  options.matrix_approximation_rank = 2;
  options.start_powersgd_iter = kWarmup;
  auto hook = ddp::make_powersgd_hook(options);
  const RunResult compressed = train_mlp(g, hook, kWarmup);
  g->print_primary("full precision: loss ", full.initial_loss, " -> ", full.final_loss, ", ",
                   full.bytes_per_step, " bytes/step; PowerSGD rank 2: loss ",
                   compressed.final_loss, ", ", compressed.bytes_per_step, " bytes/step");
  CHECK_THAT(full.final_loss < 0.5 * full.initial_loss, "full precision did not learn");
  CHECK_THAT(
      compressed.final_loss < full.final_loss * 1.25 + 0.02,
      "PowerSGD ended at " << compressed.final_loss << ", full precision at " << full.final_loss);
  CHECK_THAT(compressed.bytes_per_step < 0.25 * full.bytes_per_step,
             "PowerSGD sent " << compressed.bytes_per_step << " bytes per step");
  const auto stats = hook->stats();
  CHECK_THAT(stats.iterations == 60 && stats.numel_after_compression > 0 &&
                 stats.numel_after_compression * 4 < stats.numel_before_compression,
             "PowerSGD stats " << stats.iterations << " " << stats.numel_before_compression << " "
                               << stats.numel_after_compression);
  return 0;
}

// The same training as powersgd_reference.py (PyTorch's own powerSGD_hook): initial weights
// and batches from `data` (written by the test), final weights to `out`, both as pickles.
int powersgd_torch(Group g, const Args& args) {
  const int r = g->rank(), n = g->size();
  auto input = torch::pickle_load(read_all(arg(args, "data"))).toGenericDict();
  auto init = input.at("init").toTensorVector();
  auto xs = input.at("x").toTensor();
  auto ys = input.at("y").toTensor();
  const int64_t per_rank = xs.size(1) / n;
  auto net =
      torch::nn::Sequential(torch::nn::Linear(8, 32), torch::nn::ReLU(), torch::nn::Linear(32, 16),
                            torch::nn::ReLU(), torch::nn::Linear(16, 4));
  {
    torch::NoGradGuard no_grad;
    auto params = net->parameters();
    CHECK_THAT(params.size() == init.size(), "init has " << init.size() << " tensors");
    for (std::size_t i = 0; i < params.size(); ++i) params[i].copy_(init[i]);
  }
  ddp::PowerSgdOptions psgd;
  psgd.matrix_approximation_rank = 1;
  psgd.start_powersgd_iter = 2;
  ddp::DdpOptions options;
  options.comm_hook = ddp::make_powersgd_hook(psgd);
  ddp::DistributedDataParallel model(net, g, options);
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int64_t step = 0; step < xs.size(0); ++step) {
    optimizer.zero_grad();
    auto x = xs[step].narrow(0, r * per_rank, per_rank);
    auto y = ys[step].narrow(0, r * per_rank, per_rank);
    torch::nn::functional::cross_entropy(model(x), y).backward();
    optimizer.step();
  }
  if (g->is_primary()) {
    c10::List<at::Tensor> out;
    for (auto& p : net->parameters()) out.push_back(p.detach().clone());
    write_all(arg(args, "out"), torch::pickle_save(c10::IValue(out)));
  }
  return 0;
}

}  // namespace worker
