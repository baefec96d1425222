// Fashion-MNIST with a BatchNorm CNN, trained data-parallel with the worker SDK.
//
//   ddprun --standalone --nproc_per_node 2 --no_python build/examples/mnist
//       --epochs 3 --out_dir /tmp/mnist_run
//
// Each epoch: distributed random sampling, SGD with momentum, progress from rank 0 while it
// trains (a live bar on a terminal, a line every --progress_interval seconds otherwise), an
// evaluation with top-1 and top-5 accuracy reduced across ranks, and a snapshot. Killed and
// restarted (ddprun --max_restarts), it resumes from the newest snapshot at the exact step;
// run again with a larger --epochs, it trains on from where it ended. Rank 0 writes
// <out_dir>/model.pt and <out_dir>/accuracy.json and says where everything is.
#include <chrono>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "ddp/ddp.h"
#include "examples/common/fashion_mnist.h"
#include "examples/common/progress.h"

namespace {

struct Accuracy {
  double top1 = 0, top5 = 0, loss = 0;
};

// Evaluates this rank's shard of the test set; sums are reduced so every rank gets the
// accuracy over the whole test set.
Accuracy evaluate(examples::MnistCnn& net, const examples::MnistSplit& test,
                  ddp::ProcessGroup& group) {
  torch::NoGradGuard no_grad;
  net->eval();
  ddp::DistributedSequentialSampler sampler(test.images.size(0), group.size(), group.rank(), false);
  double top1 = 0, top5 = 0, loss_sum = 0, count = 0;
  while (auto indices = sampler.next(500)) {
    auto idx = torch::tensor(std::vector<int64_t>(indices->begin(), indices->end()));
    auto logits = net(test.images.index_select(0, idx));
    auto labels = test.labels.index_select(0, idx);
    auto hits = std::get<1>(logits.topk(5, 1)).eq(labels.unsqueeze(1));
    top1 += hits.select(1, 0).sum().item<double>();
    top5 += hits.any(1).sum().item<double>();
    loss_sum +=
        torch::nn::functional::cross_entropy(
            logits, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
            .item<double>();
    count += static_cast<double>(idx.size(0));
  }
  auto totals = torch::tensor({top1, top5, loss_sum, count}, torch::kDouble);
  group.all_reduce(totals, ddp::ReduceOp::kSum);
  net->train();
  const double n = totals[3].item<double>();
  return {totals[0].item<double>() / n, totals[1].item<double>() / n, totals[2].item<double>() / n};
}

// Where the outputs are and how to go on, printed by rank 0 at the end.
void print_summary(const std::filesystem::path& out_dir, const std::filesystem::path& snapshots,
                   const std::string& newest, int world_size, int argc, char** argv, long epochs) {
  std::string command = "ddprun --standalone --nproc_per_node " + std::to_string(world_size) +
                        " --no_python " + argv[0];
  bool epochs_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool is_epochs = a == "--epochs" && i + 1 < argc;
    command += " " + a + (is_epochs ? " " + std::to_string(epochs + 2) : "");
    epochs_given = epochs_given || is_epochs;
    i += is_epochs ? 1 : 0;
  }
  if (!epochs_given) command += " --epochs " + std::to_string(epochs + 2);
  std::cout << "\nmnist: done. Outputs:\n"
            << "  model             " << (out_dir / "model.pt").string() << "\n"
            << "  accuracy history  " << (out_dir / "accuracy.json").string() << "\n"
            << "  snapshots         " << snapshots.string() << " (newest: " << newest << ")\n"
            << "To resume or train further (it continues from the newest snapshot), run the\n"
            << "same command with a larger --epochs:\n  " << command << "\n"
            << std::flush;
}

// The example's flags.
struct Flags {
  long epochs = 3, batch = 64, seed = 0, train_limit = 0, test_limit = 0;
  double lr = 0.05, progress_interval = 10;
  std::string out_dir = "mnist_out", snapshot_dir, data = examples::kDebianFashionMnistDir;
  std::string cache_dir;
};

void add_flags(CLI::App& app, Flags& f) {
  app.add_option("--epochs", f.epochs, "Epochs to train")->capture_default_str();
  app.add_option("--batch_size", f.batch, "Batch size per rank")->capture_default_str();
  app.add_option("--lr", f.lr, "SGD learning rate (momentum 0.9)")->capture_default_str();
  app.add_option("--out_dir", f.out_dir, "Model, accuracy history and snapshots")
      ->capture_default_str();
  app.add_option("--snapshot_dir", f.snapshot_dir, "Snapshots (default <out_dir>/snapshots)");
  app.add_option("--seed", f.seed, "Random seed")->capture_default_str();
  app.add_option("--data", f.data, "Directory of the Fashion-MNIST IDX files (.gz)")
      ->capture_default_str();
  app.add_option("--cache_dir", f.cache_dir,
                 "Where the decompressed files go (default <out_dir>/data)");
  app.add_option("--train_limit", f.train_limit, "Use only the first N training images (0: all)");
  app.add_option("--test_limit", f.test_limit, "Use only the first N test images (0: all)");
  app.add_option("--progress_interval", f.progress_interval,
                 "Seconds between progress lines when stdout is not a terminal")
      ->capture_default_str();
}

// One epoch's training from `step` on (a resumed epoch starts where its snapshot was taken);
// returns the mean loss over every rank's steps.
double train_epoch(ddp::DistributedDataParallel<examples::MnistCnn>& model,
                   torch::optim::SGD& optimizer, ddp::DistributedRandomSampler& sampler,
                   const examples::MnistSplit& train, ddp::ProcessGroup& group, const Flags& f,
                   int64_t epoch, int64_t step, int64_t& global_step) {
  ddp::seek(sampler, epoch, step, f.batch);
  auto loss_sum = torch::zeros({}, torch::kDouble);
  int64_t local_steps = 0;
  // Samples per rank: the sampler drops the remainder (allow_duplicates = false).
  const int64_t per_rank = train.images.size(0) / group.size();
  const int64_t steps_per_epoch = (per_rank + f.batch - 1) / f.batch;
  examples::EpochProgress bar(group.is_primary(), epoch, f.epochs, step, steps_per_epoch,
                              f.batch * group.size(), f.progress_interval);
  while (auto indices = sampler.next(f.batch)) {
    auto idx = torch::tensor(std::vector<int64_t>(indices->begin(), indices->end()));
    auto loss = torch::nn::functional::cross_entropy(model(train.images.index_select(0, idx)),
                                                     train.labels.index_select(0, idx));
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    loss_sum += loss.detach().to(torch::kDouble);
    ++step, ++global_step, ++local_steps;
    bar.step(loss.item<double>());
  }
  bar.finish();
  auto mean_loss = loss_sum / std::max<int64_t>(local_steps, 1);
  group.all_reduce(mean_loss, ddp::ReduceOp::kAvg);
  return mean_loss.item<double>();
}

}  // namespace

int run(int argc, char** argv);

int main(int argc, char** argv) {
  return ddp::record([&]() -> int { return run(argc, argv); });
}

int run(int argc, char** argv) {
  Flags f;
  CLI::App app{"Fashion-MNIST CNN trained data-parallel with the ddprun worker SDK"};
  add_flags(app, f);
  CLI11_PARSE(app, argc, argv);
  const std::filesystem::path out_dir = f.out_dir;
  const std::filesystem::path snapshot_dir =
      f.snapshot_dir.empty() ? (out_dir / "snapshots").string() : f.snapshot_dir;

  auto group = ddp::init_process_group();
  torch::manual_seed(f.seed + group->rank());
  const auto data_dir = examples::prepare_fashion_mnist(
      f.data, f.cache_dir.empty() ? (out_dir / "data").string() : f.cache_dir);
  const auto train = examples::load_fashion_mnist(data_dir, true, f.train_limit);
  const auto test = examples::load_fashion_mnist(data_dir, false, f.test_limit);

  examples::MnistCnn net;
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(f.lr).momentum(0.9));
  ddp::Snapshotter snapshots(group, {snapshot_dir, 2});
  auto progress = snapshots.load_latest(*net, &optimizer).value_or(ddp::TrainingProgress{});
  nlohmann::json history = progress.user.count("history")
                               ? nlohmann::json::parse(progress.user["history"])
                               : nlohmann::json::array();
  if (progress.global_step > 0) {
    group->print_primary("resuming at epoch ", progress.epoch, " step ", progress.step_in_epoch);
  }
  ddp::DistributedDataParallel model(net, group);
  model.set_step_offset(progress.global_step);  // heartbeats count from the resumed step
  ddp::DistributedRandomSampler sampler(train.images.size(0), group->size(), group->rank(), false);
  int64_t global_step = progress.global_step;

  for (int64_t epoch = progress.epoch; epoch < f.epochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    const int64_t step = epoch == progress.epoch ? progress.step_in_epoch : 0;
    const double train_loss =
        train_epoch(model, optimizer, sampler, train, *group, f, epoch, step, global_step);
    const Accuracy acc = evaluate(net, test, *group);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    history.push_back({{"epoch", epoch},
                       {"train_loss", train_loss},
                       {"test_loss", acc.loss},
                       {"top1", acc.top1},
                       {"top5", acc.top5},
                       {"seconds", seconds}});
    group->print_primary("epoch ", epoch + 1, "/", f.epochs, "  train loss ", train_loss,
                         "  test top-1 ", acc.top1 * 100, "%  top-5 ", acc.top5 * 100, "%  (",
                         seconds, " s)");
    snapshots.save(*net, &optimizer, {epoch + 1, 0, global_step, {{"history", history.dump()}}});
  }

  if (group->is_primary()) {
    std::filesystem::create_directories(out_dir);
    torch::save(net, (out_dir / "model.pt").string());
    std::ofstream(out_dir / "accuracy.json") << history.dump(2) << "\n";
    const auto saved = snapshots.list();
    print_summary(out_dir, snapshot_dir, saved.empty() ? "none" : saved.front().filename().string(),
                  group->size(), argc, argv, f.epochs);
  }
  ddp::destroy_process_group();  // every rank done: rank 0 may take the store down
  return 0;
}
