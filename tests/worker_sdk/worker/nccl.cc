// The NCCL path on CUDA tensors (an SDK built with DDP_WITH_NCCL, on a machine with a GPU):
// collectives, DDP (default hook, gradient_as_bucket_view, bf16 compression), SyncBatchNorm on
// ATen's CUDA statistics kernels, and a snapshot holding the CUDA RNG state. Self-checking:
// every expected value comes from the ranks' own inputs (all-gathered), so the scenario runs
// with any number of ranks, several of them on one GPU included (NCCL_MULTI_RANK_GPU_ENABLE).
#include <iostream>

#include "tests/worker_sdk/worker/worker.h"

namespace worker {
namespace {

at::TensorOptions on(const at::Device& device, at::ScalarType dtype = at::kFloat) {
  return at::TensorOptions().device(device).dtype(dtype);
}

void check_collectives(const Group& g) {
  const int r = g->rank(), n = g->size();
  const auto dev = g->device();
  const double rr = r + 1;
  double sum = 0, prod = 1;
  for (int i = 1; i <= n; ++i) sum += i, prod *= i;
  struct Case {
    ddp::ReduceOp op;
    double expected;
  };
  for (auto [op, expected] : {Case{ddp::ReduceOp::kSum, sum}, Case{ddp::ReduceOp::kAvg, sum / n},
                              Case{ddp::ReduceOp::kMin, 1.0}, Case{ddp::ReduceOp::kMax, double(n)},
                              Case{ddp::ReduceOp::kProduct, prod}}) {
    auto t = torch::full({3}, rr, on(dev, at::kDouble));
    g->all_reduce(t, op);
    CHECK_THAT(t.is_cuda() && torch::allclose(t.cpu(), torch::full({3}, expected, at::kDouble)),
               "all_reduce op " << int(op) << " gave " << t);
  }
  auto async = torch::full({1000}, rr, on(dev));
  g->all_reduce_async(async).wait();
  CHECK_THAT(torch::allclose(async.cpu(), torch::full({1000}, sum)), "all_reduce_async");

  auto b = r == n - 1 ? torch::arange(5, on(dev)) : torch::zeros({5}, on(dev));
  g->broadcast(b, n - 1);
  CHECK_THAT(torch::equal(b.cpu(), torch::arange(5, at::kFloat)), "broadcast gave " << b);

  auto uneven = g->all_gather(torch::full({r + 1, 2}, rr, on(dev)));
  CHECK_THAT(int(uneven.size()) == n, "all_gather size " << uneven.size());
  for (int i = 0; i < n; ++i) {
    CHECK_THAT(torch::equal(uneven[i].cpu(), torch::full({i + 1, 2}, double(i + 1))),
               "uneven all_gather " << i << ": " << uneven[i]);
  }
  // reduce_scatter: rows [r*2, r*2+2) of the sum of every rank's (arange + rank).
  auto input = torch::arange(2 * n, on(dev)) + r;
  auto mine = g->reduce_scatter(input);
  auto expected = (torch::arange(2 * n, at::kFloat) * n + (n - 1) * n / 2).narrow(0, 2 * r, 2);
  CHECK_THAT(torch::allclose(mine.cpu(), expected), "reduce_scatter gave " << mine);
  // all_to_all: rank r sends (r+1) * 10 + j, j + 1 times, to rank j.
  std::vector<at::Tensor> to_each;
  for (int j = 0; j < n; ++j) to_each.push_back(torch::full({j + 1}, rr * 10 + j, on(dev)));
  auto from_each = g->all_to_all(to_each);
  for (int j = 0; j < n; ++j) {
    CHECK_THAT(torch::equal(from_each[j].cpu(), torch::full({r + 1}, (j + 1) * 10.0 + r)),
               "all_to_all from " << j << ": " << from_each[j]);
  }
  const std::string bytes = g->broadcast_bytes(r == 0 ? "from rank 0" : "");
  CHECK_THAT(bytes == "from rank 0", "broadcast_bytes gave '" << bytes << "'");
  if (n > 1) {  // a ring of send/recv (even ranks send first)
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    auto from_prev = torch::zeros({4}, on(dev));
    if (r % 2 == 0) {
      g->send(torch::full({4}, rr, on(dev)), next);
      g->recv(from_prev, prev);
    } else {
      g->recv(from_prev, prev);
      g->send(torch::full({4}, rr, on(dev)), next);
    }
    CHECK_THAT(torch::equal(from_prev.cpu(), torch::full({4}, double(prev + 1))), "send/recv");
  }
  g->barrier();
}

torch::nn::Sequential make_net(const at::Device& dev) {
  torch::manual_seed(3);
  torch::nn::Sequential net(torch::nn::Linear(8, 32), torch::nn::ReLU(), torch::nn::Linear(32, 4));
  net->to(dev);
  return net;
}

// DDP's averaged gradients equal the average of every rank's local gradients, computed here
// by a plain copy of the model and all-gathered; three steps (buckets are rebuilt after one).
void check_ddp(const Group& g, const std::string& mode) {
  const auto dev = g->device();
  auto net = make_net(dev);
  auto plain = make_net(dev);
  ddp::DdpOptions options;
  options.gradient_as_bucket_view = mode == "view";
  if (mode == "bf16") options.comm_hook = ddp::make_bf16_compress_hook();
  const double tolerance = mode == "bf16" ? 2e-2 : 1e-5;
  ddp::DistributedDataParallel model(net, g, options);
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.05));
  auto gen = at::detail::createCPUGenerator(100 + g->rank());
  for (int step = 0; step < 3; ++step) {
    auto x = torch::randn({16, 8}, gen).to(dev);
    auto y = torch::randint(0, 4, {16}, gen, torch::kLong).to(dev);
    {
      torch::NoGradGuard no_grad;
      auto from = net->parameters(), to = plain->parameters();
      for (std::size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
    }
    plain->zero_grad();
    torch::nn::functional::cross_entropy(plain->forward(x), y).backward();
    optimizer.zero_grad();
    torch::nn::functional::cross_entropy(model(x), y).backward();
    auto got = net->parameters(), local = plain->parameters();
    for (std::size_t i = 0; i < got.size(); ++i) {
      CHECK_THAT(got[i].grad().is_cuda(), mode << ": gradient " << i << " left the GPU");
      auto average = torch::stack(g->all_gather(local[i].grad().contiguous())).mean(0);
      CHECK_THAT(torch::allclose(got[i].grad(), average, tolerance, tolerance),
                 mode << " step " << step << " parameter " << i << ": max difference "
                      << (got[i].grad() - average).abs().max().item<double>());
    }
    optimizer.step();
  }
  check_same_on_all_ranks(*g, net->parameters());
}

// SyncBatchNorm on rank r's r+2 samples equals BatchNorm on every rank's samples together,
// output, input gradient and running statistics.
void check_sync_batch_norm(const Group& g) {
  const int r = g->rank();
  const auto dev = g->device();
  auto gen = at::detail::createCPUGenerator(40 + r);
  auto x = (torch::randn({r + 2, 3, 4, 4}, gen) * (r + 1) + r).to(dev).requires_grad_(true);
  auto w = torch::randn({r + 2, 3, 4, 4}, gen).to(dev);  // the loss's weights
  ddp::SyncBatchNorm bn(3);
  bn->to(dev);
  auto out = bn(x);
  (out * w).sum().backward();

  auto xs = g->all_gather(x.detach()), ws = g->all_gather(w);
  auto global = torch::cat(xs).requires_grad_(true);
  torch::nn::BatchNorm2d reference(3);
  reference->to(dev);
  auto global_out = reference(global);
  (global_out * torch::cat(ws)).sum().backward();
  int64_t start = 0;
  for (int i = 0; i < r; ++i) start += xs[i].size(0);
  auto expect_out = global_out.detach().narrow(0, start, r + 2);
  auto expect_grad = global.grad().narrow(0, start, r + 2);
  CHECK_THAT(torch::allclose(out.detach(), expect_out, 1e-4, 1e-4), "SyncBatchNorm output");
  CHECK_THAT(torch::allclose(x.grad(), expect_grad, 1e-4, 1e-4),
             "SyncBatchNorm input gradient: max difference "
                 << (x.grad() - expect_grad).abs().max().item<double>());
  CHECK_THAT(torch::allclose(bn->running_mean, reference->running_mean, 1e-5, 1e-5) &&
                 torch::allclose(bn->running_var, reference->running_var, 1e-4, 1e-4),
             "SyncBatchNorm running statistics");
}

// A snapshot of a CUDA model restores its weights and this rank's CUDA RNG state.
void check_snapshot(const Group& g, const std::string& dir) {
  const auto dev = g->device();
  auto net = make_net(dev);
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.05));
  ddp::Snapshotter snapshots(g, {dir, 2});
  snapshots.save(*net, &optimizer, {0, 0, 7, {}});
  auto next_draw = torch::randn({4}, on(dev));  // the CUDA generator's draw after the save
  auto other = make_net(dev);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : other->parameters()) p.zero_();
  }
  auto progress = snapshots.load_latest(*other, nullptr);
  CHECK_THAT(progress && progress->global_step == 7, "snapshot not found");
  auto want = net->parameters(), got = other->parameters();
  for (std::size_t i = 0; i < want.size(); ++i) {
    CHECK_THAT(got[i].is_cuda() && torch::equal(got[i], want[i]), "parameter " << i);
  }
  CHECK_THAT(torch::equal(torch::randn({4}, on(dev)), next_draw), "CUDA RNG state not restored");
}

}  // namespace

int nccl(Group g, const Args& args) {
  CHECK_THAT(g->backend() == ddp::Backend::kNccl, "not an NCCL group");
  CHECK_THAT(g->device().is_cuda(), "NCCL group on " << g->device());
  check_collectives(g);
  for (const std::string mode : {"plain", "view", "bf16"}) check_ddp(g, mode);
  check_sync_batch_norm(g);
  check_snapshot(g, arg(args, "dir"));
  g->print_primary("nccl ok on ", g->size(), " ranks, device ", g->device());
  return 0;
}

}  // namespace worker
