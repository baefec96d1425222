// Benchmark of the SDK's snapshots, 2 ranks under a launcher, each rank with its own directory
// (<dir>/rank_<r>: two "nodes" on one machine). Rank 0 prints one line "BENCH {json}" per run:
//   --mode train   steps_per_s of a ~state_mb MLP (SGD with momentum: as much optimizer state)
//                  with a snapshot every --every steps, and the median time the training
//                  thread spent per snapshot, for: no snapshot; only an in-memory copy of
//                  the state (clones of every parameter and momentum buffer, the floor a
//                  background save aims at); save() synchronous; save() in the background
//                  serialising on the training thread (serialise_in_background = false);
//                  save() in the background (the default: copy, then serialise on the writer)
//   --mode resume  median time of load_latest() with every rank's copy on its disk (local)
//                  and with rank 1's directory deleted (its copy received from rank 0: peer)
// Run by bench/worker_sdk/run_snapshot_bench.sh (results in docs/benchmarks.md).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "ddp/ddp.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Layers of 1024 x 1024 (4 MiB each) adding up to about `state_mb`.
torch::nn::Sequential make_mlp(int state_mb) {
  torch::nn::Sequential net;
  for (int i = 0; i < std::max(1, state_mb / 4); ++i) {
    net->push_back(torch::nn::Linear(1024, 1024));
    net->push_back(torch::nn::ReLU());
  }
  return net;
}

// What a snapshot does in one training run.
enum class Saving { kNone, kCopyOnly, kSync, kBackgroundSerialiseHere, kBackground };

const char* name_of(Saving saving) {
  switch (saving) {
    case Saving::kNone:
      return "none";
    case Saving::kCopyOnly:
      return "copy only";
    case Saving::kSync:
      return "synchronous";
    case Saving::kBackgroundSerialiseHere:
      return "background, serialised on the training thread";
    case Saving::kBackground:
      return "background";
  }
  return "?";
}

// The floor: a clone of every tensor a snapshot holds (kept until the next, as a save's copy
// is kept until its write ends).
std::vector<torch::Tensor> copy_state(torch::nn::Module& net, torch::optim::SGD& optimizer) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> copies;
  for (const auto& p : net.parameters()) copies.push_back(p.detach().clone());
  for (const auto& [key, state] : optimizer.state()) {
    const auto& momentum = static_cast<const torch::optim::SGDParamState&>(*state);
    copies.push_back(momentum.momentum_buffer().clone());
  }
  return copies;
}

nlohmann::json train(const std::shared_ptr<ddp::ProcessGroup>& group, const fs::path& dir,
                     int state_mb, int steps, int every, int batch, Saving saving) {
  torch::manual_seed(1);
  auto net = make_mlp(state_mb);
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(1e-3).momentum(0.9));
  ddp::SnapshotOptions options;
  options.directory = dir / std::to_string(static_cast<int>(saving));
  options.keep_last = 2;
  options.background = saving != Saving::kSync;
  options.serialise_in_background = saving == Saving::kBackground;
  ddp::Snapshotter snapshots(group, options);
  std::vector<torch::Tensor> kept;
  auto x = torch::randn({batch, 1024});
  std::vector<double> save_ms;
  group->barrier();
  const auto start = Clock::now();
  for (int step = 1; step <= steps; ++step) {
    optimizer.zero_grad();
    net->forward(x).square().mean().backward();
    optimizer.step();
    if (step % every == 0 && saving != Saving::kNone) {
      const auto t = Clock::now();
      if (saving == Saving::kCopyOnly) {
        kept = copy_state(*net, optimizer);
      } else {
        snapshots.save(*net, &optimizer, {0, step, step, {}});
      }
      save_ms.push_back(ms_since(t));
    }
  }
  snapshots.wait();
  const double seconds = ms_since(start) / 1000;
  return {{"mode", "train"},
          {"saving", name_of(saving)},
          {"state_mb", state_mb},
          {"steps", steps},
          {"every", every},
          {"batch", batch},
          {"steps_per_s", steps / seconds},
          {"save_ms", median(save_ms)}};
}

// One parameter of state_mb MiB: the file is about that size.
struct Blob : torch::nn::Module {
  explicit Blob(int state_mb)
      : w(register_parameter("w", torch::randn({int64_t(state_mb) << 18}))) {}
  torch::Tensor w;
};

nlohmann::json resume(const std::shared_ptr<ddp::ProcessGroup>& group, const fs::path& dir,
                      int state_mb, int reps) {
  Blob blob(state_mb);
  ddp::SnapshotOptions options;
  options.directory = dir;
  options.background = false;
  ddp::Snapshotter snapshots(group, options);
  snapshots.save(blob, nullptr, {0, 1, 1, {}});
  std::vector<double> local, peer;
  for (int rep = 0; rep < reps; ++rep) {
    for (bool from_peer : {false, true}) {
      if (from_peer && group->rank() == 1) fs::remove_all(dir);
      group->barrier();
      const auto t = Clock::now();
      snapshots.load_latest(blob, nullptr);
      group->barrier();
      (from_peer ? peer : local).push_back(ms_since(t));
    }
  }
  return {{"mode", "resume"},
          {"state_mb", state_mb},
          {"reps", reps},
          {"local_ms", median(local)},
          {"peer_ms", median(peer)}};
}

int run(int argc, char** argv) {
  std::string mode = "train", dir;
  int state_mb = 100, steps = 40, every = 5, batch = 8, reps = 3;
  CLI::App app{"snapshot benchmark: background vs synchronous saves, resume from a peer"};
  app.add_option("--mode", mode, "train or resume")->capture_default_str();
  app.add_option("--dir", dir, "scratch directory (rank_<r> per rank)")->required();
  app.add_option("--state_mb", state_mb, "model size in MiB")->capture_default_str();
  app.add_option("--steps", steps, "train: timed steps")->capture_default_str();
  app.add_option("--every", every, "train: a snapshot every N steps")->capture_default_str();
  app.add_option("--batch", batch, "train: batch size")->capture_default_str();
  app.add_option("--reps", reps, "resume: repetitions")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(1);
  ddp::InitOptions init;
  init.backend = ddp::Backend::kGloo;
  auto group = ddp::init_process_group(init);
  const fs::path mine = fs::path(dir) / ("rank_" + std::to_string(group->rank()));
  std::vector<nlohmann::json> results;
  if (mode == "train") {
    for (Saving saving : {Saving::kNone, Saving::kCopyOnly, Saving::kSync,
                          Saving::kBackgroundSerialiseHere, Saving::kBackground}) {
      results.push_back(train(group, mine, state_mb, steps, every, batch, saving));
    }
  } else {
    results.push_back(resume(group, mine, state_mb, reps));
  }
  for (const auto& r : results) group->print_primary("BENCH ", r.dump());
  ddp::destroy_process_group();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ddp::record([&] { return run(argc, argv); });
}
