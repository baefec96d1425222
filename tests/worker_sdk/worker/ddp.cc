// DistributedDataParallel across ranks: the modes compared with one process by ddp_test.cc,
// buffer broadcasts, bucket rebuilding, uneven inputs (join) and heartbeats.
#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

#include "tests/worker_sdk/test_models.h"
#include "tests/worker_sdk/worker/worker.h"

namespace worker {
namespace {

using namespace ddp_test;

ddp::DdpOptions options_for(const std::string& mode) {
  ddp::DdpOptions options;
  options.first_bucket_cap_bytes = 64;  // the last Linear's bias alone
  options.bucket_cap_bytes = 1200;      // a few parameters per bucket
  if (mode == "unused") {
    options.find_unused_parameters = true;
  } else if (mode == "static") {
    options.static_graph = true;  // finds 'branch' (rank 0 only) and 'never' in iteration 1
  } else {
    options.unused_parameters = mixed_net_unused_names();
  }
  if (mode == "fp16") options.comm_hook = ddp::make_fp16_compress_hook();
  if (mode == "bf16") options.comm_hook = ddp::make_bf16_compress_hook();
  if (mode == "view") options.gradient_as_bucket_view = true;
  if (mode == "powersgd_full") {
    // A rank as large as every matrix: PowerSGD is then exact (up to rounding), which checks
    // its averaging, orthogonalisation, warm start and error feedback end to end.
    ddp::PowerSgdOptions psgd;
    psgd.matrix_approximation_rank = 64;
    psgd.start_powersgd_iter = 2;
    psgd.min_compression_rate = 0;
    options.comm_hook = ddp::make_powersgd_hook(psgd);
  }
  return options;
}

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
}  // namespace

int buffers(Group g, const Args&) {
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

// The modes of ddp_test.cc: rank-dependent initial weights (DDP must broadcast rank 0's),
// `steps` steps, weights written by rank 0 to `out`.
int ddp_modes(Group g, const Args& args) {
  const std::string mode = arg(args, "mode", "plain");
  const int steps = std::stoi(arg(args, "steps", "3"));
  const int r = g->rank(), n = g->size();

  auto net = make_mixed_net();
  if (r != 0) {
    torch::NoGradGuard no_grad;
    for (auto& p : net->parameters()) p.add_(1.0);
  }
  ddp::DistributedDataParallel model(net, g, options_for(mode));
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
      // The branch runs on rank 0 only (used somewhere, unused locally on others).
      const bool use_branch = (mode == "unused" || mode == "static") && r == 0;
      auto loss = torch::nn::functional::cross_entropy(model(b.x, use_branch), b.y);
      loss.backward();
    }
    if (mode == "unused" || mode == "static") {
      CHECK_THAT(!net->never->weight.grad().defined(), "a never-used parameter got a gradient");
      CHECK_THAT(net->branch->weight.grad().defined(), "a globally used branch has no gradient");
    }
    if (mode == "view") {
      // The gradient is a view of its bucket: it stayed one through zero_grad() and backward.
      const auto grad = net->fc1->weight.grad();
      CHECK_THAT(grad.defined() && grad.storage().data() != nullptr, "no gradient");
      CHECK_THAT(grad.data_ptr() != net->fc2->weight.grad().data_ptr(), "views overlap");
    }
    optimizer.step();
  }
  CHECK_THAT(model.stats().synced_iterations == std::size_t(steps), "synced iterations");
  auto params = parameters_of(*net);
  check_same_on_all_ranks(*g, params);
  if (g->is_primary()) torch::save(params, arg(args, "out"));
  return 0;
}

namespace {

// Registered a, b, c; used c, then b, then a: backward produces a's gradients first, the
// reverse of the registration order the first buckets are built in.
struct ReversedNetImpl : torch::nn::Module {
  ReversedNetImpl()
      : a(register_module("a", torch::nn::Linear(16, 4))),
        b(register_module("b", torch::nn::Linear(16, 16))),
        c(register_module("c", torch::nn::Linear(8, 16))) {}
  torch::Tensor forward(const torch::Tensor& x) { return a(torch::relu(b(torch::relu(c(x))))); }
  torch::nn::Linear a, b, c;
};
TORCH_MODULE(ReversedNet);

}  // namespace

// Buckets follow the order gradients became ready in the first iteration (rank 0's).
int rebuild(Group g, const Args& args) {
  torch::manual_seed(3);
  ReversedNet net;
  ddp::DdpOptions options;
  options.first_bucket_cap_bytes = 64;
  options.bucket_cap_bytes = 256;
  options.gradient_as_bucket_view = arg(args, "view") == "1";
  ddp::DistributedDataParallel model(net, g, options);
  auto first_bucket = [&] { return model.bucket_parameter_names().front(); };
  CHECK_THAT(first_bucket().front() == "c.bias", "initial first bucket " << first_bucket().front());
  torch::optim::SGD optimizer(net->parameters(), 0.1);
  for (int step = 0; step < 3; ++step) {
    auto b = rank_slice(global_batch(step, g->size(), kPerRank), g->rank(), kPerRank);
    optimizer.zero_grad();
    torch::nn::functional::cross_entropy(model(b.x), b.y).backward();
    optimizer.step();
    if (step == 0) {
      CHECK_THAT(model.stats().buckets_rebuilt, "not rebuilt after the first iteration");
      for (const auto& name : first_bucket()) {
        CHECK_THAT(name.rfind("a.", 0) == 0, "rebuilt first bucket holds " << name);
      }
    }
  }
  check_same_on_all_ranks(*g, parameters_of(*net));
  std::vector<at::Tensor> grads;
  for (auto& p : net->parameters()) grads.push_back(p.grad());
  check_same_on_all_ranks(*g, grads);  // averaged, through the rebuilt buckets
  g->print_primary("rebuilt buckets:", model.stats().bucket_count);
  return 0;
}

// Uneven inputs: rank r has batches_of(r) batches; join() lets the epoch end everywhere.
// Rank 0 writes the final weights, which every rank must share.
int join(Group g, const Args& args) {
  const int r = g->rank(), n = g->size();
  const int mine = batches_of_rank(r);
  auto net = make_mixed_net();
  ddp::DdpOptions options;
  options.unused_parameters = mixed_net_unused_names();
  ddp::DistributedDataParallel model(net, g, options);
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(kLearningRate));
  model.join([&] {
    for (int step = 0; step < mine; ++step) {
      auto b = rank_slice(global_batch(step, n, kPerRank), r, kPerRank);
      optimizer.zero_grad();
      torch::nn::functional::cross_entropy(model(b.x, false), b.y).backward();
      optimizer.step();
    }
  });
  int most = 0;
  for (int k = 0; k < n; ++k) most = std::max(most, batches_of_rank(k));
  CHECK_THAT(model.stats().shadowed_iterations == std::size_t(most - mine),
             "shadowed " << model.stats().shadowed_iterations);
  check_same_on_all_ranks(*g, parameters_of(*net));
  if (g->is_primary()) torch::save(parameters_of(*net), arg(args, "out"));
  return 0;
}

// After every synchronised step the heartbeat file (DDPRUN_HEARTBEAT_FILE) holds the step,
// counted from the offset set after a (pretend) resume, and from the second step on the rank's
// busy time: from the end of the previous step's synchronisation to this one's (stragglers).
int heartbeat(Group g, const Args&) {
  const char* file = std::getenv("DDPRUN_HEARTBEAT_FILE");
  CHECK_THAT(file != nullptr, "DDPRUN_HEARTBEAT_FILE is not set");
  auto read = [&] {
    std::ifstream in(file);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    return text.substr(0, text.find('\n') + 1);
  };
  // "<step>" of "<step>[ <busy>]\n", and the busy seconds (-1: none).
  auto step_of = [](const std::string& line) { return line.substr(0, line.find_first_of(" \n")); };
  auto busy_of = [](const std::string& line) {
    const auto blank = line.find(' ');
    return blank == std::string::npos ? -1.0 : std::stod(line.substr(blank + 1));
  };
  auto net = make_mixed_net();
  ddp::DdpOptions options;
  options.unused_parameters = mixed_net_unused_names();
  ddp::DistributedDataParallel model(net, g, options);
  model.set_step_offset(100);
  constexpr double kWorkSeconds = 0.2;  // before step 4: at least its busy time
  for (int step = 1; step <= 4; ++step) {
    auto b = rank_slice(global_batch(step, g->size(), kPerRank), g->rank(), kPerRank);
    if (step == 3) {
      auto guard = model.no_sync();  // not synchronised: no step
      torch::nn::functional::cross_entropy(model(b.x, false), b.y).backward();
      CHECK_THAT(step_of(read()) == std::to_string(100 + step - 1), "after no_sync: " << read());
    }
    if (step == 4) std::this_thread::sleep_for(std::chrono::duration<double>(kWorkSeconds));
    torch::nn::functional::cross_entropy(model(b.x, false), b.y).backward();
    const std::string line = read();
    CHECK_THAT(step_of(line) == std::to_string(100 + step), "step " << step << ": " << line);
    CHECK_THAT(line.back() == '\n', "step " << step << ": " << line);
    if (step == 1)
      CHECK_THAT(busy_of(line) < 0, "a busy time before any synchronisation: " << line);
    if (step > 1) CHECK_THAT(busy_of(line) >= 0, "no busy time at step " << step << ": " << line);
    if (step == 4) CHECK_THAT(busy_of(line) >= kWorkSeconds, "step 4 was busy longer: " << line);
  }
  ddp::heartbeat();  // no step: the last one again
  CHECK_THAT(read() == "104\n", "after heartbeat(): " << read());
  return 0;
}

}  // namespace worker
