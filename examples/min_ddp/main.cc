// The minimum DDP program: a dummy dataset and model, AdamW, cross-entropy. The loss is
// averaged and the accuracy gathered across ranks, and rank 0 prints them.
//
//   ddprun --standalone --nproc_per_node 2 --no_python build/examples/min_ddp
#include "ddp/ddp.h"

int main() {
  return ddp::record([] {  // a failure reaches the launcher's report, with a backtrace
    auto group = ddp::init_process_group();
    torch::manual_seed(group->rank());  // different data per rank; DDP syncs the weights

    // A learnable dummy task: the class is the index of the largest of the first 4 features.
    auto x = torch::randn({512, 16});
    auto y = x.narrow(1, 0, 4).argmax(1);

    auto net = torch::nn::Sequential(torch::nn::Linear(16, 64), torch::nn::ReLU(),
                                     torch::nn::Linear(64, 4));
    ddp::DistributedDataParallel model(net, group);
    torch::optim::AdamW optimizer(net->parameters(), torch::optim::AdamWOptions(1e-2));

    for (int epoch = 0; epoch < 5; ++epoch) {
      for (int64_t start = 0; start < x.size(0); start += 32) {
        auto logits = model(x.narrow(0, start, 32));
        auto loss = torch::nn::functional::cross_entropy(logits, y.narrow(0, start, 32));
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
      }
      torch::NoGradGuard no_grad;
      auto logits = net->forward(x);
      auto loss = torch::nn::functional::cross_entropy(logits, y).detach();
      group->all_reduce(loss, ddp::ReduceOp::kAvg);
      auto correct = logits.argmax(1).eq(y).sum().reshape({1});
      auto per_rank = group->all_gather(correct);  // one count per rank
      int64_t total = 0;
      for (auto& c : per_rank) total += c.item<int64_t>();
      group->print_primary("epoch ", epoch, "  loss ", loss.item<float>(), "  accuracy ",
                           100.0 * total / (x.size(0) * group->size()), "% over ", group->size(),
                           " ranks");
    }
    ddp::destroy_process_group();  // every rank done: safe to exit, no barrier needed
    return 0;
  });
}
