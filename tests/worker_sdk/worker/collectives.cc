// Collectives, bytes and objects across the group, the error model, and the end of a group.
#include <fstream>
#include <iostream>

#include "tests/worker_sdk/worker/worker.h"

namespace worker {
namespace {

void check_basic(const Group& g) {
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
}

}  // namespace

// Rank 0 all-reduces while rank 1 waits for a message that never comes: both must fail
// within the (short) timeout with an error naming their rank and operation.
int errors(Group g, const Args&) {
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
  return 0;
}

namespace {

// reduce_scatter, all_to_all (uneven), scatter, bytes and objects.
void check_toolbox(const Group& g) {
  const int r = g->rank(), n = g->size();
  const double rr = r + 1;
  double sum = 0;
  for (int i = 1; i <= n; ++i) sum += i;

  auto rows = torch::arange(n * 2 * 3, torch::kDouble).view({n * 2, 3});
  auto mine = g->reduce_scatter(rows * rr);
  CHECK_THAT(torch::allclose(mine, rows.narrow(0, r * 2, 2) * sum), "reduce_scatter " << mine);
  auto largest = g->reduce_scatter(rows * rr, ddp::ReduceOp::kMax);
  CHECK_THAT(torch::allclose(largest, rows.narrow(0, r * 2, 2) * n), "reduce_scatter max");
  bool rejected = false;
  try {
    g->reduce_scatter(torch::ones({n * 2 + 1}));
  } catch (const ddp::Error& e) {
    rejected = contains(e.what(), "multiple of the group size");
  }
  CHECK_THAT(rejected, "reduce_scatter accepted a size that does not divide");

  // Rank r sends (j + 1) rows of 100 r + j to rank j.
  std::vector<at::Tensor> outgoing;
  for (int j = 0; j < n; ++j) outgoing.push_back(torch::full({j + 1, 2}, 100.0 * r + j));
  auto incoming = g->all_to_all(outgoing);
  CHECK_THAT(static_cast<int>(incoming.size()) == n, "all_to_all count");
  for (int i = 0; i < n; ++i) {
    CHECK_THAT(torch::equal(incoming[i], torch::full({r + 1, 2}, 100.0 * i + r)),
               "all_to_all from " << i << ": " << incoming[i]);
  }

  const int root = n - 1;
  std::vector<at::Tensor> pieces;
  if (r == root) {
    for (int j = 0; j < n; ++j) pieces.push_back(torch::full({2}, 10.0 * j));
  }
  auto piece = torch::zeros({2});
  g->scatter(piece, pieces, root);
  CHECK_THAT(torch::equal(piece, torch::full({2}, 10.0 * r)), "scatter " << piece);

  const std::string said = g->broadcast_bytes(r == root ? "hello from the root" : "", root);
  CHECK_THAT(said == "hello from the root", "broadcast_bytes '" << said << "'");
  // Rank 0 contributes nothing: empty strings travel too.
  auto words = g->all_gather_bytes(std::string(static_cast<std::size_t>(r), char('a' + r)));
  for (int i = 0; i < n; ++i) {
    CHECK_THAT(words[i] == std::string(static_cast<std::size_t>(i), char('a' + i)),
               "all_gather_bytes " << i);
  }
  auto at_zero = g->gather_bytes("rank " + std::to_string(r), 0);
  CHECK_THAT(static_cast<int>(at_zero.size()) == (r == 0 ? n : 0), "gather_bytes count");
  if (r == 0) CHECK_THAT(at_zero[n - 1] == "rank " + std::to_string(n - 1), "gather_bytes");

  c10::Dict<std::string, double> config;
  if (r == 1 % n) config.insert("lr", 0.25);
  auto shared = ddp::broadcast_object(*g, c10::IValue(config), 1 % n);
  CHECK_THAT(shared.toGenericDict().at("lr").toDouble() == 0.25, "broadcast_object");
  auto pairs = ddp::all_gather_object(*g, c10::IValue(std::vector<int64_t>{r, r * r}));
  for (int i = 0; i < n; ++i) {
    CHECK_THAT(pairs[i].toIntVector() == std::vector<int64_t>({i, i * i}), "all_gather_object");
  }
  auto tensors = ddp::gather_object(*g, c10::IValue(torch::full({2}, rr)), 0);
  if (r == 0) CHECK_THAT(torch::equal(tensors[n - 1].toTensor(), torch::full({2}, double(n))), "");

  const auto before = g->counters();
  auto t = torch::ones({3}, torch::kDouble);
  g->all_reduce(t);
  const auto after = g->counters();
  CHECK_THAT(after.operations == before.operations + 1 && after.bytes == before.bytes + 24,
             "counters " << after.operations - before.operations << " ops, "
                         << after.bytes - before.bytes << " bytes");
}

}  // namespace

int collectives(Group g, const Args&) {
  check_basic(g);
  check_toolbox(g);
  g->print_primary("collectives ok on ", g->size(), " ranks");
  return 0;
}

// Rank 0 enters destroy_process_group first and must not return before every other rank has
// entered it too (it hosts the store under ddprun): the others enter only once rank 0's
// marker exists, and rank 0 checks their markers after it returns.
int destroy(Group g, const Args& args) {
  namespace fs = std::filesystem;
  const fs::path dir = arg(args, "dir");
  const int r = g->rank(), n = g->size();
  auto t = torch::ones({2});
  g->all_reduce(t);
  if (r == 0) {
    std::ofstream(dir / "rank_0_in_destroy") << "x";
    ddp::destroy_process_group();
    for (int k = 1; k < n; ++k) {
      CHECK_THAT(fs::exists(dir / ("rank_" + std::to_string(k) + "_arrived")),
                 "destroy_process_group returned before rank " << k << " arrived");
    }
  } else {
    CHECK_THAT(wait_for_file(dir / "rank_0_in_destroy", std::chrono::seconds(20)), "no marker");
    std::ofstream(dir / ("rank_" + std::to_string(r) + "_arrived")) << "x";
    ddp::destroy_process_group();
  }
  CHECK_THAT(g->destroyed() && ddp::default_group() == nullptr, "still the default group");
  ddp::destroy_process_group(g);  // a no-op now
  std::string message;
  try {
    g->all_reduce(t);
  } catch (const ddp::Error& e) {
    message = e.what();
  }
  CHECK_THAT(contains(message, "all_reduce: the process group was destroyed"), message);
  if (r == 0) std::cout << "destroy ok (agent store: " << g->launch_env().use_agent_store << ")\n";
  return 0;
}

}  // namespace worker
