// Benchmark: the Fashion-MNIST CNN trained with the C++ worker SDK, 2+ ranks under a launcher.
// Its twin, mnist_bench.py, trains the same model on the same data with Python DDP; run both
// with run_side_by_side.sh. Each rank prints one line "BENCH {json}":
//   steps_per_s        optimizer steps per second of the timed, synchronised phase
//   peak_rss_mib       the rank's peak resident set size
//   comm_wait_ms       mean time per step the DDP final callback waited for communication
//   backward_ms        mean backward() time with gradient sync
//   backward_nosync_ms mean backward() time inside no_sync() (compute only)
//   cpu_ms_per_step    CPU time (user + system, all threads) per timed step: less sensitive
//                      than steps_per_s to other tenants of a shared machine
//   comm_bytes_per_step bytes this rank handed to the backend per timed step (gradients and
//                      buffer broadcasts; ProcessGroup::counters)
//   comm_ops_per_step  collectives per timed step
// With --no_sync the timed steps themselves run inside no_sync(): no gradient communication
// at all, the ceiling that no DDP implementation can beat with this model on this machine.
#include <sys/resource.h>

#include <chrono>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "ddp/ddp.h"
#include "examples/common/fashion_mnist.h"

namespace {

using Clock = std::chrono::steady_clock;

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

std::shared_ptr<ddp::CommHook> make_hook(const std::string& name, int rank, long start) {
  if (name == "allreduce") return nullptr;
  if (name == "fp16") return ddp::make_fp16_compress_hook();
  if (name == "bf16") return ddp::make_bf16_compress_hook();
  if (name == "powersgd") {
    ddp::PowerSgdOptions options;
    options.matrix_approximation_rank = rank;
    options.start_powersgd_iter = start;
    return ddp::make_powersgd_hook(options);
  }
  throw std::invalid_argument("--comm_hook: unknown hook " + name);
}

int run(int argc, char** argv) {
  long warmup = 20, steps = 200, batch = 64, powersgd_rank = 1, powersgd_start = 10;
  bool timed_no_sync = false, gloo_only = false;
  std::string comm_hook = "allreduce";
  ddp::DdpOptions ddp_options;
  double bucket_cap_mb = ddp_options.bucket_cap_bytes / 1048576.0;
  double first_bucket_cap_mb = ddp_options.first_bucket_cap_bytes / 1048576.0;
  std::string data = examples::kDebianFashionMnistDir, cache_dir = "/tmp/ddp_bench_data";
  CLI::App app{"Fashion-MNIST CNN training throughput with the worker SDK"};
  app.add_option("--warmup", warmup, "Steps before timing starts")->capture_default_str();
  app.add_option("--steps", steps, "Timed steps")->capture_default_str();
  app.add_flag("--no_sync", timed_no_sync,
               "Run the timed steps without gradient sync (the compute-only ceiling)");
  app.add_option("--bucket_cap_mb", bucket_cap_mb, "DDP bucket size cap")->capture_default_str();
  app.add_option("--first_bucket_cap_mb", first_bucket_cap_mb, "DDP first bucket's cap")
      ->capture_default_str();
  app.add_option("--batch_size", batch, "Batch size per rank")->capture_default_str();
  app.add_flag("--gradient_as_bucket_view", ddp_options.gradient_as_bucket_view,
               "Gradients are views of the buckets (no copies)");
  app.add_flag("--static_graph", ddp_options.static_graph, "DdpOptions::static_graph");
  app.add_flag("--gloo_only", gloo_only,
               "All-reduce through Gloo even on one node (no shared memory)");
  app.add_option("--comm_hook", comm_hook, "allreduce, fp16, bf16 or powersgd")
      ->capture_default_str();
  app.add_option("--powersgd_rank", powersgd_rank, "PowerSGD matrix approximation rank")
      ->capture_default_str();
  app.add_option("--powersgd_start", powersgd_start, "PowerSGD: plain all-reduce before this step")
      ->capture_default_str();
  app.add_option("--data", data, "Fashion-MNIST IDX files (.gz)")->capture_default_str();
  app.add_option("--cache_dir", cache_dir, "Decompressed data")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  ddp::InitOptions init;
  init.shared_memory_all_reduce = !gloo_only;
  auto group = ddp::init_process_group(init);
  torch::manual_seed(group->rank());
  const auto dir = examples::prepare_fashion_mnist(data, cache_dir);
  const auto train = examples::load_fashion_mnist(dir, true);

  examples::MnistCnn net;
  ddp_options.bucket_cap_bytes = static_cast<std::size_t>(bucket_cap_mb * 1048576);
  ddp_options.first_bucket_cap_bytes = static_cast<std::size_t>(first_bucket_cap_mb * 1048576);
  ddp_options.comm_hook = make_hook(comm_hook, static_cast<int>(powersgd_rank), powersgd_start);
  ddp::DistributedDataParallel model(net, group, ddp_options);
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  ddp::DistributedRandomSampler sampler(train.images.size(0), group->size(), group->rank(), false);

  auto next_batch = [&] {
    auto indices = sampler.next(batch);
    if (!indices) {
      sampler.reset();
      indices = sampler.next(batch);
    }
    return torch::tensor(std::vector<int64_t>(indices->begin(), indices->end()));
  };
  // One training step; returns the backward() time in ms.
  auto step = [&](bool sync) {
    auto idx = next_batch();
    auto loss = torch::nn::functional::cross_entropy(model(train.images.index_select(0, idx)),
                                                     train.labels.index_select(0, idx));
    optimizer.zero_grad();
    const auto t = Clock::now();
    if (sync) {
      loss.backward();
    } else {
      auto guard = model.no_sync();
      loss.backward();
    }
    const double backward_ms = ms_since(t);
    optimizer.step();
    return backward_ms;
  };

  for (long i = 0; i < warmup; ++i) step(true);
  group->barrier();
  const auto wait_before = model.stats().comm_wait;
  const auto counters_before = group->counters();
  double backward_total = 0;
  const double cpu_start = cpu_seconds();
  const auto start = Clock::now();
  for (long i = 0; i < steps; ++i) backward_total += step(!timed_no_sync);
  const double seconds = ms_since(start) / 1000.0;
  const double cpu_ms_per_step = (cpu_seconds() - cpu_start) * 1000.0 / steps;
  const auto comm_wait = model.stats().comm_wait - wait_before;
  const auto counters_after = group->counters();
  group->barrier();
  // Compute-only reference: the same steps without gradient sync.
  double nosync_total = 0;
  const long nosync_steps = std::max(1L, steps / 4);
  for (long i = 0; i < nosync_steps; ++i) nosync_total += step(false);

  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  nlohmann::json line = {
      {"impl", "cpp_sdk"},
      {"comm_hook", comm_hook},
      {"gradient_as_bucket_view", ddp_options.gradient_as_bucket_view},
      {"shared_memory", !gloo_only},
      {"synced", !timed_no_sync},
      {"rank", group->rank()},
      {"world_size", group->size()},
      {"steps", steps},
      {"batch_size", batch},
      {"steps_per_s", steps / seconds},
      {"peak_rss_mib", usage.ru_maxrss / 1024.0},
      {"comm_wait_ms", std::chrono::duration<double, std::milli>(comm_wait).count() / steps},
      {"backward_ms", backward_total / steps},
      {"backward_nosync_ms", nosync_total / nosync_steps},
      {"cpu_ms_per_step", cpu_ms_per_step},
      {"comm_bytes_per_step",
       static_cast<double>(counters_after.bytes - counters_before.bytes) / steps},
      {"comm_ops_per_step",
       static_cast<double>(counters_after.operations - counters_before.operations) / steps},
  };
  std::cout << "BENCH " << line.dump() << std::endl;
  ddp::destroy_process_group();
  return 0;
}

int main(int argc, char** argv) {
  return ddp::record([&] { return run(argc, argv); });
}
