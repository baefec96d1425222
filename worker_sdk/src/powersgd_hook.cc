// PowerSGD, step for step as torch 1.13's powerSGD_hook (torch/distributed/algorithms/
// ddp_comm_hooks/powerSGD_hook.py), so that the same options give the same numbers:
// - the hook counts iterations on the last bucket; before start_powersgd_iter it all-reduces
//   the (pre-divided) bucket;
// - matrices are grouped by shape in order of first appearance (the layout of the P and Q
//   memories and the order in which random Qs are drawn depend on it);
// - the random Q of an iteration is drawn from a generator seeded with
//   RandomState(random_seed).randint(1_000_000_000), which is MT19937 with a masked draw;
// - orthogonalisation is Gram-Schmidt for rank <= 2, a QR decomposition above;
// - the error-feedback memory is the whole bucket's (input + error) - result.
// Communication order (identical on every rank): start() all-reduces the uncompressed
// tensors and the Ps of its bucket; the pending result all-reduces the Qs.
#include <algorithm>
#include <map>
#include <mutex>
#include <random>

#include <torch/torch.h>

#include "ddp/comm_hooks.h"
#include "ddp/error.h"
#include "ddp/process_group.h"

namespace ddp {
namespace {

// Gram-Schmidt on the columns of each matrix in a batch [b, n, r], or QR for r > 2.
void orthogonalize(at::Tensor matrices, double epsilon) {
  const int64_t rank = matrices.size(2);
  if (rank <= 2 || matrices.scalar_type() == at::kHalf || matrices.scalar_type() == at::kBFloat16) {
    for (int64_t i = 0; i < rank; ++i) {
      at::Tensor col = matrices.narrow(2, i, 1);
      at::Tensor norm = torch::norm(col, 2, {1}, /*keepdim=*/true);
      col.div_(epsilon == 0 ? norm : norm + epsilon);
      if (i + 1 < rank) {
        at::Tensor rest = matrices.narrow(2, i + 1, rank - i - 1);
        rest.sub_(torch::sum(col * rest, {1}, /*keepdim=*/true) * col);
      }
    }
  } else {
    matrices.copy_(std::get<0>(torch::linalg_qr(matrices)));
  }
}

class PowerSgd final : public PowerSgdHook {
 public:
  explicit PowerSgd(const PowerSgdOptions& o) : o_(o), rng_(o.random_seed) {}

  PendingBucket start(ProcessGroup& group, GradBucket& bucket) override;

  PowerSgdStats stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

 private:
  // A bucket's gradients as PowerSGD sees them: the matrices worth compressing, grouped by
  // shape [n, m] in order of first appearance (as views [1, n, m]), the rest as they are, and
  // the sizes of the P [n, r] and Q [m, r] memories for all of them.
  struct Layout {
    std::vector<std::pair<std::vector<int64_t>, std::vector<at::Tensor>>> by_shape;
    std::vector<at::Tensor> uncompressed;
    int64_t p_size = 0, q_size = 0;
  };
  // Each compressed matrix with its P and Q, views into the bucket's P and Q memories.
  struct Factors {
    std::vector<at::Tensor> matrices, ps, qs;
  };

  PendingBucket all_reduce_whole(ProcessGroup& group, GradBucket& bucket);
  Layout layout_of(const GradBucket& bucket);  // also counts the numels in stats_
  Factors factors_of(const Layout& layout, int b);
  // Q orthogonalised (drawn afresh when `randomize`), then P = M Q, for every matrix.
  void compute_ps(Factors& f, bool randomize, const at::TensorOptions& options);
  int64_t rank_for(int64_t n, int64_t m) const {
    return std::min({n, m, static_cast<int64_t>(o_.matrix_approximation_rank)});
  }

  // numpy's RandomState.randint(1_000_000_000): 30-bit masked draws until one is in range.
  std::int64_t next_seed() {
    std::uint32_t v;
    do {
      v = rng_() & ((1u << 30) - 1);
    } while (v > 999999999u);
    return v;
  }
  void count_iteration(const GradBucket& bucket) {
    if (bucket.is_last) ++stats_.iterations;
  }

  PowerSgdOptions o_;
  std::mt19937 rng_;
  mutable std::mutex mutex_;  // start() and results run on different threads, never at once
  std::map<int, at::Tensor> error_, p_memory_, q_memory_;
  PowerSgdStats stats_;
};

// Before start_powersgd_iter: the whole (pre-divided) bucket, all-reduced as it is.
PendingBucket PowerSgd::all_reduce_whole(ProcessGroup& group, GradBucket& bucket) {
  count_iteration(bucket);
  at::Tensor input = bucket.buffer;
  input.div_(group.size());
  Request request = group.all_reduce_async(input);
  return [request, input]() mutable {
    request.wait();
    return input;
  };
}

PowerSgd::Layout PowerSgd::layout_of(const GradBucket& bucket) {
  Layout layout;
  for (const at::Tensor& g : bucket.gradients) {
    const int64_t n = g.dim() > 0 ? g.size(0) : 1;
    const int64_t m = n > 0 ? g.numel() / n : 0;
    const int64_t r = rank_for(n, m);
    stats_.numel_before_compression += n * m;
    if (g.dim() > 0 &&
        static_cast<double>((n + m) * r) * o_.min_compression_rate < static_cast<double>(n * m)) {
      std::vector<int64_t> shape{n, m};
      auto it = std::find_if(layout.by_shape.begin(), layout.by_shape.end(),
                             [&](const auto& e) { return e.first == shape; });
      if (it == layout.by_shape.end())
        it = layout.by_shape.insert(layout.by_shape.end(), {shape, {}});
      it->second.push_back(g.view({1, n, m}));
      layout.p_size += n * r;
      layout.q_size += m * r;
      stats_.numel_after_compression += (n + m) * r;
    } else {
      layout.uncompressed.push_back(g);
      stats_.numel_after_compression += n * m;
    }
  }
  return layout;
}

PowerSgd::Factors PowerSgd::factors_of(const Layout& layout, int b) {
  Factors f;
  int64_t p_at = 0, q_at = 0;
  for (const auto& [shape, list] : layout.by_shape) {
    const int64_t n = shape[0], m = shape[1];
    const int64_t r = rank_for(n, m);
    for (const auto& matrix : list) {
      f.matrices.push_back(matrix);
      f.ps.push_back(p_memory_[b].narrow(0, p_at, n * r).view({1, n, r}));
      f.qs.push_back(q_memory_[b].narrow(0, q_at, m * r).view({1, m, r}));
      p_at += n * r;
      q_at += m * r;
    }
  }
  return f;
}

void PowerSgd::compute_ps(Factors& f, bool randomize, const at::TensorOptions& options) {
  torch::NoGradGuard no_grad;
  if (!randomize) {
    for (auto& q : f.qs) orthogonalize(q, o_.orthogonalization_epsilon);
  } else {
    auto generator = at::detail::createCPUGenerator(static_cast<uint64_t>(next_seed()));
    for (auto& q : f.qs) {
      q.copy_(torch::randn(q.sizes(), generator, options.device(at::kCPU)));
      orthogonalize(q, o_.orthogonalization_epsilon);
    }
  }
  for (std::size_t i = 0; i < f.matrices.size(); ++i)
    torch::bmm_out(f.ps[i], f.matrices[i], f.qs[i]);
}

PendingBucket PowerSgd::start(ProcessGroup& group, GradBucket& bucket) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stats_.iterations < o_.start_powersgd_iter) return all_reduce_whole(group, bucket);
  const int world = group.size();
  at::Tensor input = bucket.buffer;
  const int b = bucket.index;
  at::Tensor input_copy;
  if (o_.use_error_feedback) {
    auto it = error_.find(b);
    if (it != error_.end() && it->second.numel() == input.numel()) {
      input.add_(it->second);
    } else {
      error_[b] = torch::zeros_like(input);
    }
    input_copy = input.clone();
  }
  Layout layout = layout_of(bucket);
  std::vector<at::Tensor> flat;
  for (auto& t : layout.uncompressed) flat.push_back(t.reshape(-1));
  at::Tensor uncompressed_memory =
      flat.empty() ? torch::empty({0}, input.options()) : torch::cat(flat).contiguous();
  const bool randomize = !o_.warm_start || !p_memory_.count(b) ||
                         p_memory_[b].numel() != layout.p_size ||
                         q_memory_[b].numel() != layout.q_size;
  if (randomize) {
    p_memory_[b] = torch::empty({layout.p_size}, input.options());
    q_memory_[b] = torch::empty({layout.q_size}, input.options());
  }
  Factors f = factors_of(layout, b);
  compute_ps(f, randomize, input.options());
  Request uncompressed_request, p_request;
  if (uncompressed_memory.numel() > 0) {
    uncompressed_request = group.all_reduce_async(uncompressed_memory);
  }
  at::Tensor p_memory = p_memory_[b];
  if (p_memory.numel() > 0) p_request = group.all_reduce_async(p_memory);
  ProcessGroup* g = &group;
  GradBucket meta = bucket;
  std::vector<at::Tensor> uncompressed = std::move(layout.uncompressed);
  return [=, this]() mutable {
    torch::NoGradGuard no_grad;
    uncompressed_request.wait();
    uncompressed_memory.div_(world);
    int64_t at = 0;
    for (auto& t : uncompressed) {
      t.copy_(uncompressed_memory.narrow(0, at, t.numel()).view_as(t));
      at += t.numel();
    }
    p_request.wait();
    for (auto& p : f.ps) orthogonalize(p, o_.orthogonalization_epsilon);
    for (std::size_t i = 0; i < f.matrices.size(); ++i) {
      torch::bmm_out(f.qs[i], f.matrices[i].transpose(1, 2), f.ps[i]);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    at::Tensor q_memory = q_memory_[b];
    if (q_memory.numel() > 0) g->all_reduce(q_memory);
    q_memory.div_(world);
    for (std::size_t i = 0; i < f.matrices.size(); ++i) {
      torch::bmm_out(f.matrices[i], f.ps[i], f.qs[i].transpose(1, 2));
    }
    if (o_.use_error_feedback) error_[b] = input_copy - input;
    if (!o_.warm_start) {
      p_memory_.clear();
      q_memory_.clear();
    }
    count_iteration(meta);
    return input;
  };
}

}  // namespace

std::shared_ptr<PowerSgdHook> make_powersgd_hook(const PowerSgdOptions& options) {
  const char* op = "make_powersgd_hook";
  if (options.matrix_approximation_rank < 1) {
    throw Error(-1, op, "matrix_approximation_rank must be at least 1");
  }
  if ((options.use_error_feedback || options.warm_start) && options.start_powersgd_iter <= 1) {
    throw Error(-1, op,
                "start_powersgd_iter must be > 1 when use_error_feedback or warm_start is on: "
                "DDP rebuilds its buckets after the first iteration, which would invalidate "
                "the memorised tensors (as in PyTorch)");
  }
  return std::make_shared<PowerSgd>(options);
}

}  // namespace ddp
