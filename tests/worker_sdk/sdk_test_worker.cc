// The worker program of the SDK's multi-process tests. Started as N ranks (by the test
// harness, ddprun or torchrun), it runs one scenario and exits 0 when every check passed;
// on a failed check it prints what differs and exits 1.
//
//   sdk_test_worker collectives
//   sdk_test_worker errors
//   sdk_test_worker ddp mode=<plain|no_sync|unused|fp16> steps=<k> out=<file>
//   sdk_test_worker buffers
//   sdk_test_worker resume dir=<snapshots> out=<file> [kill_rank=<r> kill_at=<global step>]
//   sdk_test_worker snapshot_kill_during_write dir=<snapshots> expected=<file>
#include <signal.h>

#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "ddp/ddp.h"
#include "tests/worker_sdk/test_models.h"

namespace {

using Args = std::map<std::string, std::string>;

struct CheckFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

#define CHECK_THAT(cond, what)                                                \
  do {                                                                        \
    if (!(cond)) {                                                            \
      std::ostringstream msg_;                                                \
      msg_ << "check failed at line " << __LINE__ << ": " #cond ": " << what; \
      throw CheckFailed(msg_.str());                                          \
    }                                                                         \
  } while (0)

std::string arg(const Args& args, const std::string& key, const std::string& fallback = "") {
  auto it = args.find(key);
  return it == args.end() ? fallback : it->second;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---------------------------------------------------------------- collectives

void check_collectives(std::shared_ptr<ddp::ProcessGroup> g) {
  const int r = g->rank(), n = g->size();
  const double rr = r + 1;  // rank-dependent, never zero
  auto filled = [](double v) { return torch::full({3}, v, torch::kDouble); };

  struct Case {
    ddp::ReduceOp op;
    double expected;
  };
  double sum = 0, prod = 1;
  for (int i = 1; i <= n; ++i) sum += i, prod *= i;
  for (auto [op, expected] : {Case{ddp::ReduceOp::kSum, sum}, Case{ddp::ReduceOp::kAvg, sum / n},
                              Case{ddp::ReduceOp::kMin, 1.0}, Case{ddp::ReduceOp::kMax, double(n)},
                              Case{ddp::ReduceOp::kProduct, prod}}) {
    auto t = filled(rr);
    g->all_reduce(t, op);
    CHECK_THAT(torch::allclose(t, filled(expected)), "all_reduce op " << int(op) << " gave " << t);
  }

  auto b = r == n - 1 ? torch::arange(5, torch::kFloat) : torch::zeros({5});
  g->broadcast(b, n - 1);
  CHECK_THAT(torch::equal(b, torch::arange(5, torch::kFloat)), "broadcast gave " << b);

  auto red = filled(rr);
  g->reduce(red, 0, ddp::ReduceOp::kSum);
  if (r == 0) CHECK_THAT(torch::allclose(red, filled(sum)), "reduce gave " << red);

  // all_gather with equal and with unequal sizes (rank r contributes r+1 rows).
  auto gathered = g->all_gather(torch::full({2, 2}, rr));
  CHECK_THAT(int(gathered.size()) == n, "all_gather size " << gathered.size());
  auto uneven = g->all_gather(torch::full({r + 1, 2}, rr));
  for (int i = 0; i < n; ++i) {
    CHECK_THAT(torch::equal(gathered[i], torch::full({2, 2}, double(i + 1))), "all_gather " << i);
    CHECK_THAT(torch::equal(uneven[i], torch::full({i + 1, 2}, double(i + 1))),
               "uneven all_gather " << i << ": " << uneven[i]);
  }
  auto scalar = g->all_gather(torch::tensor(rr));
  CHECK_THAT(scalar[n - 1].dim() == 0 && scalar[n - 1].item<double>() == n, "scalar all_gather");

  auto at_root = g->gather(torch::full({r + 1}, rr), 1 % n);
  if (r == 1 % n) {
    CHECK_THAT(int(at_root.size()) == n, "gather count");
    for (int i = 0; i < n; ++i) {
      CHECK_THAT(torch::equal(at_root[i], torch::full({i + 1}, double(i + 1))), "gather " << i);
    }
  } else {
    CHECK_THAT(at_root.empty(), "gather on a non-root returned tensors");
  }
  g->barrier();

  // A ring: blocking send/recv (even ranks send first), then isend/irecv both ways at once.
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  auto from_prev = torch::zeros({4});
  if (r % 2 == 0) {
    g->send(torch::full({4}, rr), next, 3);
    g->recv(from_prev, prev, 3);
  } else {
    g->recv(from_prev, prev, 3);
    g->send(torch::full({4}, rr), next, 3);
  }
  CHECK_THAT(torch::equal(from_prev, torch::full({4}, double(prev + 1))),
             "send/recv " << from_prev);
  auto out = torch::full({4}, -rr);
  auto in = torch::zeros({4});
  auto send_req = g->isend(out, next, 5);
  auto recv_req = g->irecv(in, prev, 5);
  recv_req.wait();
  send_req.wait();
  CHECK_THAT(recv_req.is_completed(), "irecv not completed after wait");
  CHECK_THAT(torch::equal(in, torch::full({4}, -double(prev + 1))), "isend/irecv " << in);

  // Sub-group of the first two ranks: members get a group of size 2, the others nullptr.
  auto sub = g->new_group({0, 1});
  if (r <= 1) {
    CHECK_THAT(sub && sub->size() == 2 && sub->rank() == r, "sub-group membership");
    auto t = filled(rr);
    sub->all_reduce(t);
    CHECK_THAT(torch::allclose(t, filled(3.0)), "sub-group all_reduce " << t);
    CHECK_THAT(sub->is_primary() == (r == 0), "sub-group primary");
  } else {
    CHECK_THAT(sub == nullptr, "non-member got a sub-group");
  }
  // The default group still works after creating a sub-group.
  auto t = filled(1.0);
  g->all_reduce(t);
  CHECK_THAT(torch::allclose(t, filled(n)), "all_reduce after new_group");

  CHECK_THAT(g->is_primary() == (r == 0), "is_primary");
  g->print_primary("collectives ok on ", n, " ranks");
  g->barrier();
}

// ---------------------------------------------------------------- errors

// Rank 0 all-reduces while rank 1 waits for a message that never comes: both must fail
// within the (short) timeout with an error naming their rank and operation.
void check_errors(std::shared_ptr<ddp::ProcessGroup> g) {
  std::string message;
  try {
    if (g->rank() == 0) {
      auto t = torch::ones({2});
      g->all_reduce(t);
    } else {
      auto t = torch::zeros({2});
      g->recv(t, 0, 42);
    }
  } catch (const ddp::Error& e) {
    message = e.what();
    CHECK_THAT(e.rank() == g->rank(), "error rank " << e.rank());
  }
  std::cout << "error: " << message << std::endl;
  const std::string expected_op = g->rank() == 0 ? "all_reduce" : "recv from rank 0";
  CHECK_THAT(contains(message, "ddp rank " + std::to_string(g->rank()) + ": " + expected_op),
             "message was '" << message << "'");
}

// ---------------------------------------------------------------- buffer broadcast

struct BufferedNetImpl : torch::nn::Module {
  BufferedNetImpl() {
    fc = register_module("fc", torch::nn::Linear(2, 2));
    level = register_buffer("level", torch::zeros({1}));
  }
  torch::Tensor forward(torch::Tensor x) { return fc(x) + level; }
  torch::nn::Linear fc{nullptr};
  torch::Tensor level;
};
TORCH_MODULE(BufferedNet);

// Buffers follow torch DDP: broadcast from rank 0 before a training forward unless the
// previous training forward ran inside no_sync(); never in eval mode.
int run_buffers(std::shared_ptr<ddp::ProcessGroup> g) {
  const float own = static_cast<float>(g->rank() + 1);
  BufferedNet net;
  ddp::DistributedDataParallel model(net, g);
  auto x = torch::ones({1, 2});
  auto set_own = [&] {
    torch::NoGradGuard no_grad;
    net->level.fill_(own);
  };
  auto level = [&] { return net->level.item<float>(); };

  set_own();
  model(x);  // the first forward broadcasts
  CHECK_THAT(level() == 1.0f, "first forward: level " << level());
  set_own();
  {
    auto guard = model.no_sync();
    model(x);  // follows a synchronised forward: broadcasts
  }
  CHECK_THAT(level() == 1.0f, "no_sync forward: level " << level());
  set_own();
  model(x);  // follows a no_sync() forward: keeps the local buffer, as torch DDP does
  CHECK_THAT(level() == own, "forward after no_sync: level " << level());
  model(x);  // follows a synchronised forward again
  CHECK_THAT(level() == 1.0f, "second synchronised forward: level " << level());
  set_own();
  net->eval();
  model(x);
  CHECK_THAT(level() == own, "eval forward: level " << level());
  net->train();
  model(x);  // the eval forward did not count: the last training forward was synchronised
  CHECK_THAT(level() == 1.0f, "training again: level " << level());
  return 0;
}

// ---------------------------------------------------------------- DDP

int run_ddp(std::shared_ptr<ddp::ProcessGroup> g, const Args& args) {
  using namespace ddp_test;
  const std::string mode = arg(args, "mode", "plain");
  const int steps = std::stoi(arg(args, "steps", "3"));
  const int r = g->rank(), n = g->size();

  auto net = make_mixed_net();
  if (r != 0) {
    // Different local initialisation: DDP must broadcast rank 0's weights.
    torch::NoGradGuard no_grad;
    for (auto& p : net->parameters()) p.add_(1.0);
  }
  ddp::DdpOptions options;
  options.first_bucket_cap_bytes = 64;  // the last Linear's bias alone
  options.bucket_cap_bytes = 1200;      // a few parameters per bucket
  if (mode == "unused") {
    options.find_unused_parameters = true;
  } else {
    options.unused_parameters = mixed_net_unused_names();
  }
  if (mode == "fp16") options.comm_hook = ddp::make_fp16_compress_hook();
  ddp::DistributedDataParallel model(net, g, options);
  CHECK_THAT(model.stats().bucket_count >= 3, "only " << model.stats().bucket_count << " buckets");

  torch::optim::SGD optimizer(net->parameters(),
                              torch::optim::SGDOptions(kLearningRate).momentum(kMomentum));
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    if (mode == "no_sync") {
      for (int m = 0; m < kMicroBatches; ++m) {
        auto b = rank_slice(global_batch(step * kMicroBatches + m, n, kPerRank), r, kPerRank);
        auto loss = torch::nn::functional::cross_entropy(model(b.x, false), b.y);
        if (m + 1 < kMicroBatches) {
          auto guard = model.no_sync();
          loss.backward();
        } else {
          loss.backward();
        }
      }
    } else {
      auto b = rank_slice(global_batch(step, n, kPerRank), r, kPerRank);
      // "unused": the branch runs on rank 0 only (used somewhere, unused locally on others).
      const bool use_branch = mode == "unused" && r == 0;
      auto loss = torch::nn::functional::cross_entropy(model(b.x, use_branch), b.y);
      loss.backward();
    }
    if (mode == "unused") {
      CHECK_THAT(!net->never->weight.grad().defined(), "a never-used parameter got a gradient");
      CHECK_THAT(net->branch->weight.grad().defined(), "a globally used branch has no gradient");
    }
    optimizer.step();
  }
  CHECK_THAT(model.stats().synced_iterations == std::size_t(steps), "synced iterations");
  auto params = parameters_of(*net);
  // Every rank must hold the same weights.
  for (auto& p : params) {
    auto gathered = g->all_gather(p);
    for (auto& other : gathered) CHECK_THAT(torch::equal(other, p), "ranks diverged");
  }
  if (g->is_primary()) torch::save(params, arg(args, "out"));
  g->barrier();
  return 0;
}

// ---------------------------------------------------------------- resume

struct ResumeNetImpl : torch::nn::Module {
  ResumeNetImpl()
      : fc1(register_module("fc1", torch::nn::Linear(6, 24))),
        drop(register_module("drop", torch::nn::Dropout(0.2))),
        fc2(register_module("fc2", torch::nn::Linear(24, 3))) {}
  torch::Tensor forward(const torch::Tensor& x) { return fc2(drop(torch::relu(fc1(x)))); }
  torch::nn::Linear fc1;
  torch::nn::Dropout drop;
  torch::nn::Linear fc2;
};
TORCH_MODULE(ResumeNet);

int run_resume(std::shared_ptr<ddp::ProcessGroup> g, const Args& args) {
  constexpr int kSamples = 96, kBatch = 8, kEpochs = 3, kSaveEvery = 4;
  const int kill_rank = std::stoi(arg(args, "kill_rank", "-1"));
  const int kill_at = std::stoi(arg(args, "kill_at", "-1"));
  const int r = g->rank();
  torch::set_num_threads(1);  // bit-exact results need the same reduction order every run
  torch::manual_seed(7 + r);

  auto gen = at::detail::createCPUGenerator(99);
  auto data = torch::randn({kSamples, 6}, gen);
  auto labels = torch::randint(0, 3, {kSamples}, gen, torch::kLong);

  ResumeNet net;
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(0.01));
  ddp::Snapshotter snapshots(g, {arg(args, "dir"), 2, nullptr});
  auto progress = snapshots.load_latest(*net, &optimizer).value_or(ddp::TrainingProgress{});
  if (g->launch_env().restart_count > 0) {
    g->print_primary("resumed at epoch ", progress.epoch, " step ", progress.step_in_epoch,
                     " (global step ", progress.global_step, ")");
  }
  ddp::DistributedDataParallel model(net, g);
  ddp::DistributedRandomSampler sampler(kSamples, g->size(), r, /*allow_duplicates=*/false);
  int64_t global = progress.global_step;
  for (int64_t epoch = progress.epoch; epoch < kEpochs; ++epoch) {
    int64_t step = epoch == progress.epoch ? progress.step_in_epoch : 0;
    ddp::seek(sampler, epoch, step, kBatch);
    while (auto indices = sampler.next(kBatch)) {
      auto idx = torch::tensor(std::vector<int64_t>(indices->begin(), indices->end()));
      auto loss = torch::nn::functional::cross_entropy(model(data.index_select(0, idx)),
                                                       labels.index_select(0, idx));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      ++step;
      ++global;
      if (g->launch_env().restart_count == 0 && r == kill_rank && global == kill_at) {
        std::cout << "rank " << r << " kills itself at global step " << global << std::endl;
        ::raise(SIGKILL);
      }
      if (global % kSaveEvery == 0) snapshots.save(*net, &optimizer, {epoch, step, global, {}});
    }
  }
  if (g->is_primary()) torch::save(ddp_test::parameters_of(*net), arg(args, "out"));
  g->barrier();
  return 0;
}

// ---------------------------------------------------------------- snapshot kill

// World size 1: saves step 1, records its weights in `expected`, trains on, and dies by
// SIGKILL in the middle of writing step 2 (temp file durable, not yet renamed).
int run_snapshot_kill(std::shared_ptr<ddp::ProcessGroup> g, const Args& args) {
  auto net = ddp_test::make_mixed_net();
  ddp::SnapshotOptions options;
  options.directory = arg(args, "dir");
  options.before_rename = [](const std::filesystem::path&) { ::raise(SIGKILL); };
  ddp::Snapshotter first(g, {options.directory, 3, nullptr});
  first.save(*net, nullptr, {0, 1, 1, {{"note", "complete"}}});
  torch::save(ddp_test::parameters_of(*net), arg(args, "expected"));
  {
    torch::NoGradGuard no_grad;
    for (auto& p : net->parameters()) p.mul_(2.0);
  }
  ddp::Snapshotter dying(g, options);
  dying.save(*net, nullptr, {0, 2, 2, {}});
  std::cout << "survived a SIGKILL?" << std::endl;
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: sdk_test_worker <scenario> [key=value...]\n";
    return 2;
  }
  const std::string scenario = argv[1];
  Args args;
  for (int i = 2; i < argc; ++i) {
    std::string kv = argv[i];
    auto eq = kv.find('=');
    args[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
  }
  try {
    ddp::InitOptions init;
    init.allow_single_process = scenario == "snapshot_kill_during_write";
    init.timeout = std::chrono::milliseconds(std::stoi(arg(args, "timeout_ms", "30000")));
    auto group = ddp::init_process_group(init);
    if (scenario == "collectives") {
      check_collectives(group);
      return 0;
    }
    if (scenario == "errors") {
      check_errors(group);
      return 0;
    }
    if (scenario == "ddp") return run_ddp(group, args);
    if (scenario == "buffers") return run_buffers(group);
    if (scenario == "resume") return run_resume(group, args);
    if (scenario == "snapshot_kill_during_write") return run_snapshot_kill(group, args);
    std::cerr << "unknown scenario " << scenario << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "sdk_test_worker " << scenario << " failed: " << e.what() << std::endl;
    return 1;
  }
}
