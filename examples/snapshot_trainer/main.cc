// The classic torchrun tutorial trainer ("multinode_torchrun.py"), in C++: a Trainer that
// saves a snapshot every `save_every` epochs and, when restarted, resumes from it.
//
//   ddprun --standalone --nproc_per_node 2 --max_restarts 3 --no_python
//       build/examples/snapshot_trainer 50 10 --snapshot_dir /tmp/snap
//   (args: total_epochs save_every [--batch_size 32] [--snapshot_dir DIR])
#include <iostream>

#include <CLI/CLI.hpp>

#include "ddp/ddp.h"

namespace {

// 2048 random (20 features -> 1 target) samples, the tutorial's MyTrainDataset.
struct Dataset {
  torch::Tensor x = torch::rand({2048, 20}, at::detail::createCPUGenerator(0));
  torch::Tensor y = torch::rand({2048, 1}, at::detail::createCPUGenerator(1));
};

class Trainer {
 public:
  Trainer(std::shared_ptr<ddp::ProcessGroup> group, int64_t save_every, int64_t batch_size,
          const std::string& snapshot_dir)
      : group_(group),
        save_every_(save_every),
        batch_size_(batch_size),
        net_(torch::nn::Linear(20, 1)),
        optimizer_(net_->parameters(), torch::optim::SGDOptions(1e-3)),
        snapshots_(group, {snapshot_dir, 2}),
        sampler_(data_.x.size(0), group->size(), group->rank()) {
    if (auto progress = snapshots_.load_latest(*net_, &optimizer_)) {
      epochs_run_ = progress->epoch;
      std::cout << "rank " << group->rank() << ": resuming training from snapshot at epoch "
                << epochs_run_ << std::endl;
    }
    model_ = std::make_unique<ddp::DistributedDataParallel<torch::nn::Linear>>(net_, group_);
  }

  void train(int64_t max_epochs) {
    for (int64_t epoch = epochs_run_; epoch < max_epochs; ++epoch) {
      run_epoch(epoch);
      // Unlike the Python tutorial, every rank calls save(): it is collective (each node's
      // local rank 0 writes a complete copy to its own disk, in the background).
      if ((epoch + 1) % save_every_ == 0) save_snapshot(epoch + 1);
    }
    // The last background write published (and its failure raised) before the job ends.
    snapshots_.wait();
  }

 private:
  void run_epoch(int64_t epoch) {
    sampler_.set_epoch(epoch);
    sampler_.reset();
    int64_t steps = 0;
    while (auto indices = sampler_.next(batch_size_)) {
      auto idx = torch::tensor(std::vector<int64_t>(indices->begin(), indices->end()));
      optimizer_.zero_grad();
      auto loss =
          torch::mse_loss((*model_)(data_.x.index_select(0, idx)), data_.y.index_select(0, idx));
      loss.backward();
      optimizer_.step();
      ++steps;
    }
    std::cout << "[rank " << group_->rank() << "] epoch " << epoch << " | batch size "
              << batch_size_ << " | steps " << steps << std::endl;
  }

  void save_snapshot(int64_t epochs_run) {
    auto path = snapshots_.save(*net_, &optimizer_, {epochs_run, 0, epochs_run, {}});
    group_->print_primary("epoch ", epochs_run - 1, " | training snapshot saved at ",
                          path.string());
  }

  std::shared_ptr<ddp::ProcessGroup> group_;
  int64_t save_every_, batch_size_;
  int64_t epochs_run_ = 0;
  Dataset data_;
  torch::nn::Linear net_;
  torch::optim::SGD optimizer_;
  ddp::Snapshotter snapshots_;
  ddp::DistributedRandomSampler sampler_;
  std::unique_ptr<ddp::DistributedDataParallel<torch::nn::Linear>> model_;
};

}  // namespace

int run(int argc, char** argv) {
  int64_t total_epochs = 0, save_every = 0, batch_size = 32;
  std::string snapshot_dir = "snapshot_trainer_snapshots";
  CLI::App app{"torchrun's tutorial trainer in C++: snapshots every save_every epochs, resumes"};
  app.add_option("total_epochs", total_epochs, "Total epochs to train")->required();
  app.add_option("save_every", save_every, "Save a snapshot every N epochs")->required();
  app.add_option("--batch_size", batch_size, "Input batch size per rank")->capture_default_str();
  app.add_option("--snapshot_dir", snapshot_dir,
                 "Where each node keeps its snapshots: a node-local path (the same on every "
                 "node; a peer's copy is received when this node has none); {node} is "
                 "replaced by the node's GROUP_RANK")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  auto group = ddp::init_process_group();
  Trainer trainer(group, save_every, batch_size, snapshot_dir);
  trainer.train(total_epochs);
  ddp::destroy_process_group();
  return 0;
}

int main(int argc, char** argv) {
  return ddp::record([&] { return run(argc, argv); });
}
