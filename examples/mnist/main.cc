// Fashion-MNIST with a BatchNorm CNN, trained data-parallel with the worker SDK.
//
//   ddprun --standalone --nproc_per_node 2 --no_python build/examples/mnist \
//       --epochs 3 --out_dir /tmp/mnist_run
//
// Each epoch: distributed random sampling, SGD with momentum, an evaluation with top-1 and
// top-5 accuracy reduced across ranks, a progress line from rank 0, and a snapshot. Killed
// and restarted (ddprun --max_restarts), it resumes from the newest snapshot at the exact
// step. Rank 0 writes <out_dir>/model.pt and <out_dir>/accuracy.json at the end.
#include <chrono>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ddp/ddp.h"
#include "examples/common/args.h"
#include "examples/common/fashion_mnist.h"

namespace {

struct Accuracy {
  double top1 = 0, top5 = 0, loss = 0;
};

// Evaluates this rank's shard of the test set; sums are reduced so every rank gets the
// accuracy over the whole test set.
Accuracy evaluate(examples::MnistCnn& net, const examples::MnistSplit& test, ddp::ProcessGroup& group) {
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
    loss_sum += torch::nn::functional::cross_entropy(
                    logits, labels,
                    torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .item<double>();
    count += static_cast<double>(idx.size(0));
  }
  auto totals = torch::tensor({top1, top5, loss_sum, count}, torch::kDouble);
  group.all_reduce(totals, ddp::ReduceOp::kSum);
  net->train();
  const double n = totals[3].item<double>();
  return {totals[0].item<double>() / n, totals[1].item<double>() / n, totals[2].item<double>() / n};
}

}  // namespace

int main(int argc, char** argv) try {
  examples::Args args(argc, argv);
  const long epochs = args.num("epochs", 3);
  const long batch = args.num("batch_size", 64);  // per rank
  const double lr = args.real("lr", 0.05);
  const std::filesystem::path out_dir = args.str("out_dir", "mnist_out");
  const std::filesystem::path snapshot_dir = args.str("snapshot_dir", (out_dir / "snapshots").string());

  auto group = ddp::init_process_group();
  torch::manual_seed(args.num("seed", 0) + group->rank());
  const auto data_dir = examples::prepare_fashion_mnist(
      args.str("data", examples::kDebianFashionMnistDir),
      args.str("cache_dir", (out_dir / "data").string()));
  const auto train = examples::load_fashion_mnist(data_dir, true, args.num("train_limit", 0));
  const auto test = examples::load_fashion_mnist(data_dir, false, args.num("test_limit", 0));

  examples::MnistCnn net;
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(lr).momentum(0.9));
  ddp::Snapshotter snapshots(group, {snapshot_dir, 2, nullptr});
  auto progress = snapshots.load_latest(*net, &optimizer).value_or(ddp::TrainingProgress{});
  nlohmann::json history = progress.user.count("history")
                               ? nlohmann::json::parse(progress.user["history"])
                               : nlohmann::json::array();
  if (progress.global_step > 0) {
    group->print_primary("resuming at epoch ", progress.epoch, " step ", progress.step_in_epoch);
  }
  ddp::DistributedDataParallel model(net, group);
  ddp::DistributedRandomSampler sampler(train.images.size(0), group->size(), group->rank(), false);
  int64_t global_step = progress.global_step;

  for (int64_t epoch = progress.epoch; epoch < epochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    int64_t step = epoch == progress.epoch ? progress.step_in_epoch : 0;
    ddp::seek(sampler, epoch, step, batch);
    auto loss_sum = torch::zeros({}, torch::kDouble);
    int64_t local_steps = 0;
    while (auto indices = sampler.next(batch)) {
      auto idx = torch::tensor(std::vector<int64_t>(indices->begin(), indices->end()));
      auto loss = torch::nn::functional::cross_entropy(model(train.images.index_select(0, idx)),
                                                       train.labels.index_select(0, idx));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      loss_sum += loss.detach().to(torch::kDouble);
      ++step, ++global_step, ++local_steps;
    }
    auto mean_loss = loss_sum / std::max<int64_t>(local_steps, 1);
    group->all_reduce(mean_loss, ddp::ReduceOp::kAvg);
    const Accuracy acc = evaluate(net, test, *group);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    history.push_back({{"epoch", epoch}, {"train_loss", mean_loss.item<double>()},
                       {"test_loss", acc.loss}, {"top1", acc.top1}, {"top5", acc.top5},
                       {"seconds", seconds}});
    group->print_primary("epoch ", epoch + 1, "/", epochs, "  train loss ", mean_loss.item<double>(),
                         "  test top-1 ", acc.top1 * 100, "%  top-5 ", acc.top5 * 100, "%  (",
                         seconds, " s)");
    snapshots.save(*net, &optimizer, {epoch + 1, 0, global_step, {{"history", history.dump()}}});
  }

  if (group->is_primary()) {
    std::filesystem::create_directories(out_dir);
    torch::save(net, (out_dir / "model.pt").string());
    std::ofstream(out_dir / "accuracy.json") << history.dump(2) << "\n";
  }
  group->barrier();
  return 0;
} catch (const std::exception& e) {
  std::cerr << "mnist: " << e.what() << std::endl;
  return 1;
}
