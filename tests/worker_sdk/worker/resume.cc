// Snapshots across ranks: exact resume after a kill, a writer killed mid-write, and the
// ranks' agreement on which snapshot to load.
#include <signal.h>
#include <unistd.h>

#include <iostream>

#include "tests/worker_sdk/test_models.h"
#include "tests/worker_sdk/worker/worker.h"

namespace worker {
namespace {

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

// Blocks forever, as a rank stuck before its next collective (a deadlock, a dead mount) would:
// the frame the stack printed on the launcher's SIGABRT must show. Bounded by an alarm so that
// a test that goes wrong does not hang.
[[gnu::noinline]] void stuck_before_collective() {
  ::alarm(120);
  for (;;) ::pause();
}

}  // namespace

int resume(Group g, const Args& args) {
  constexpr int kSamples = 96, kBatch = 8, kSaveEvery = 4;
  const int epochs = std::stoi(arg(args, "epochs", "3"));
  // stop_at=N: every rank leaves after global step N (its snapshots written), as when a node
  // is lost and the job is started again by hand.
  const int stop_at = std::stoi(arg(args, "stop_at", "-1"));
  const int kill_rank = std::stoi(arg(args, "kill_rank", "-1"));
  const int kill_at = std::stoi(arg(args, "kill_at", "-1"));
  const int hang_rank = std::stoi(arg(args, "hang_rank", "-1"));
  const int hang_at = std::stoi(arg(args, "hang_at", "-1"));
  // hang_beat=1: the hung rank first reports the next step, as the ranks waiting for it do, so
  // that only its stack tells it apart.
  const bool hang_beat = arg(args, "hang_beat", "0") == "1";
  // wipe_at_kill=1: the killed rank first deletes its snapshot directory (a node losing its
  // disk); it waits for its own background write (list()) so that nothing lands there after.
  const bool wipe_at_kill = arg(args, "wipe_at_kill", "0") == "1";
  // pause_rank=R pause_at=N: in a run that did not resume, every rank waits for the snapshots
  // written so far (all durable on every node), then rank R says so on stdout and stops
  // making progress until it is killed, as a node about to be lost would: the test kills its
  // node from outside, while the others wait in the next collective.
  const int pause_rank = std::stoi(arg(args, "pause_rank", "-1"));
  const int pause_at = std::stoi(arg(args, "pause_at", "-1"));
  const int r = g->rank();
  torch::set_num_threads(1);  // bit-exact results need the same reduction order every run
  torch::manual_seed(7 + r);

  auto gen = at::detail::createCPUGenerator(99);
  auto data = torch::randn({kSamples, 6}, gen);
  auto labels = torch::randint(0, 3, {kSamples}, gen, torch::kLong);

  ResumeNet net;
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(0.01));
  ddp::SnapshotOptions options;
  options.directory = arg(args, "dir");
  options.keep_last = 2;
  options.background = arg(args, "background", "1") == "1";
  ddp::Snapshotter snapshots(g, options);
  auto loaded = snapshots.load_latest(*net, &optimizer);
  auto progress = loaded.value_or(ddp::TrainingProgress{});
  for (const auto& w : snapshots.load_warnings()) g->print_primary("warning: ", w);
  if (loaded) {
    g->print_primary("resumed at epoch ", progress.epoch, " step ", progress.step_in_epoch,
                     " (global step ", progress.global_step, ")");
  }
  ddp::DistributedDataParallel model(net, g);
  ddp::DistributedRandomSampler sampler(kSamples, g->size(), r, /*allow_duplicates=*/false);
  int64_t global = progress.global_step;
  for (int64_t epoch = progress.epoch; epoch < epochs; ++epoch) {
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
        if (wipe_at_kill) {
          snapshots.list();
          std::filesystem::remove_all(snapshots.directory());
          std::cout << "rank " << r << " deleted " << snapshots.directory().string() << std::endl;
        }
        ::raise(SIGKILL);
      }
      if (global % kSaveEvery == 0) snapshots.save(*net, &optimizer, {epoch, step, global, {}});
      if (!loaded && global == pause_at) {
        snapshots.wait();
        if (r == pause_rank) {
          std::cout << "rank " << r << " pauses at global step " << global << " writing to "
                    << snapshots.directory().string() << std::endl;
          stuck_before_collective();
        }
      }
      if (global == stop_at) {
        snapshots.wait();
        std::cout << "rank " << r << " stops at global step " << global << std::endl;
        return 0;
      }
      if (g->launch_env().restart_count == 0 && r == hang_rank && global == hang_at) {
        std::cout << "rank " << r << " stops making progress after global step " << global
                  << std::endl;
        if (hang_beat) ddp::heartbeat(global + 1);
        stuck_before_collective();
      }
    }
  }
  snapshots.wait();
  if (g->is_primary()) torch::save(ddp_test::parameters_of(*net), arg(args, "out"));
  return 0;
}

// World size 1: saves step 1, records its weights in `expected`, trains on, and dies by
// SIGKILL in the middle of writing step 2 (temp file durable, not yet renamed); background=0
// writes synchronously, else on the Snapshotter's writer thread.
int snapshot_kill(Group g, const Args& args) {
  auto net = ddp_test::make_mixed_net();
  ddp::SnapshotOptions options;
  options.directory = arg(args, "dir");
  options.background = arg(args, "background", "1") == "1";
  {
    ddp::Snapshotter first(g, options);
    first.save(*net, nullptr, {0, 1, 1, {{"note", "complete"}}});
  }
  torch::save(ddp_test::parameters_of(*net), arg(args, "expected"));
  {
    torch::NoGradGuard no_grad;
    for (auto& p : net->parameters()) p.mul_(2.0);
  }
  // The SDK's fault injection (snapshot_files.cc): SIGKILL just before the rename, on the
  // background writer's thread when options.background.
  ::setenv("DDP_TEST_FAILPOINT", "kill_before_snapshot_rename", 1);
  ddp::Snapshotter dying(g, options);
  dying.save(*net, nullptr, {0, 2, 2, {}});
  dying.wait();
  std::cout << "survived a SIGKILL?" << std::endl;
  return 1;
}

// Each rank reads its own directory, <dir>/rank_<r> (as with node-local disks), prepared by
// the test with different damage per rank. Prints what was loaded, or the error.
int snapshot_agree(Group g, const Args& args) {
  const auto dir = std::filesystem::path(arg(args, "dir")) / ("rank_" + std::to_string(g->rank()));
  auto net = ddp_test::MixedNet();
  ddp::Snapshotter snapshots(g, {dir, 3});
  try {
    auto progress = snapshots.load_latest(*net, nullptr);
    std::cout << "loaded global step " << (progress ? progress->global_step : -1) << std::endl;
    for (const auto& w : snapshots.load_warnings()) std::cout << "warning: " << w << std::endl;
  } catch (const ddp::Error& e) {
    std::cout << "error: " << e.what() << std::endl;
  }
  return 0;
}

}  // namespace worker
