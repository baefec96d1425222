// ProcessGroup's operations: collectives, bytes, point-to-point. Every call checks its
// arguments, takes the backend (throwing if the group was destroyed) and turns backend
// failures into ddp::Error naming rank and operation.
#include <algorithm>
#include <numeric>

#include <torch/torch.h>

#include "group_state.h"

namespace ddp {
namespace detail {

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:  // summed, then divided: Gloo has no AVG
      return c10d::ReduceOp::SUM;
    case ReduceOp::kMin:
      return c10d::ReduceOp::MIN;
    case ReduceOp::kMax:
      return c10d::ReduceOp::MAX;
    case ReduceOp::kProduct:
      return c10d::ReduceOp::PRODUCT;
  }
  return c10d::ReduceOp::SUM;
}

Request all_to_all_equal_async(ProcessGroup& group, at::Tensor& out, at::Tensor& in) {
  GroupState& s = GroupAccess::state(group);
  const std::string name = "all_to_all";
  check_tensor(s, name, in);
  check_tensor(s, name, out);
  auto pg = backend_for(s, name, bytes_of(in));
  auto work = std::make_shared<PendingWork>();
  work->rank = s.global_rank;
  work->operation = name;
  work->work = guarded(s.global_rank, name, [&] {
    std::vector<int64_t> equal;  // empty: equal splits
    return pg->alltoall_base(out, in, equal, equal, c10d::AllToAllOptions());
  });
  return Request(std::move(work));
}

}  // namespace detail

namespace {

using detail::backend_for;
using detail::bytes_of;
using detail::check_peer;
using detail::check_tensor;
using detail::GroupState;
using detail::guarded;
using detail::wait_work;

void check_avg(const GroupState& s, const std::string& op, ReduceOp reduce, const at::Tensor& t) {
  if (reduce == ReduceOp::kAvg && !at::isFloatingType(t.scalar_type())) {
    throw Error(s.global_rank, op, "ReduceOp::kAvg needs a floating-point tensor");
  }
}

std::shared_ptr<detail::PendingWork> pending(const GroupState& s, const std::string& op) {
  auto work = std::make_shared<detail::PendingWork>();
  work->rank = s.global_rank;
  work->operation = op;
  return work;
}

// Gloo needs equal shapes: exchange dim-0 sizes, pad to the largest, gather, then trim.
struct Padded {
  at::Tensor input;
  std::vector<int64_t> sizes;
  bool scalar = false;
};

Padded pad_for_gather(GroupState& s, const std::string& name, const at::Tensor& tensor) {
  check_tensor(s, name, tensor);
  Padded out;
  out.scalar = tensor.dim() == 0;
  at::Tensor t = out.scalar ? tensor.reshape({1}) : tensor;
  const auto meta = torch::TensorOptions(torch::kLong).device(s.device);
  auto local = torch::full({1}, t.size(0), meta);
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int i = 0; i < s.size; ++i) outputs[0].push_back(torch::empty({1}, meta));
  auto pg = backend_for(s, name, bytes_of(local));
  guarded(s.global_rank, name + " (exchanging sizes)", [&] {
    std::vector<at::Tensor> inputs{local};
    wait_work(pg->allgather(outputs, inputs, c10d::AllgatherOptions()));
  });
  int64_t largest = 0;
  for (auto& size : outputs[0]) {
    out.sizes.push_back(size.item<int64_t>());
    largest = std::max(largest, out.sizes.back());
  }
  if (largest == t.size(0)) {
    out.input = t;
  } else {
    auto shape = t.sizes().vec();
    shape[0] = largest;
    out.input = torch::zeros(shape, t.options());
    out.input.narrow(0, 0, t.size(0)).copy_(t);
  }
  return out;
}

std::vector<at::Tensor> trim(std::vector<at::Tensor> gathered, const Padded& padded) {
  for (size_t i = 0; i < gathered.size(); ++i) {
    gathered[i] = padded.scalar ? gathered[i].reshape({})
                                : gathered[i].narrow(0, 0, padded.sizes[i]).contiguous();
  }
  return gathered;
}

at::Tensor bytes_to_tensor(const std::string& bytes, at::Device device) {
  auto t = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(t.data_ptr<uint8_t>()));
  return t.to(device);
}

std::string tensor_to_bytes(const at::Tensor& tensor) {
  const at::Tensor t = tensor.cpu();
  const auto* data = reinterpret_cast<const char*>(t.data_ptr<uint8_t>());
  return std::string(data, data + t.numel());
}

// Sums (or min/max/product) a list of equally shaped tensors into the first.
at::Tensor reduce_list(const std::vector<at::Tensor>& parts, ReduceOp op) {
  at::Tensor acc = parts.front().clone();
  for (std::size_t i = 1; i < parts.size(); ++i) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc.add_(parts[i]);
        break;
      case ReduceOp::kMin:
        acc = torch::minimum(acc, parts[i]);
        break;
      case ReduceOp::kMax:
        acc = torch::maximum(acc, parts[i]);
        break;
      case ReduceOp::kProduct:
        acc.mul_(parts[i]);
        break;
    }
  }
  if (op == ReduceOp::kAvg) acc.div_(static_cast<double>(parts.size()));
  return acc;
}

}  // namespace

void ProcessGroup::all_reduce(at::Tensor& tensor, ReduceOp op) {
  const std::string name = "all_reduce";
  check_tensor(*state_, name, tensor);
  check_avg(*state_, name, op, tensor);
  if ((op == ReduceOp::kSum || op == ReduceOp::kAvg) &&
      detail::intra_node_eligible(*this, tensor) && detail::intra_node_all_reduce(*this, tensor)) {
    if (op == ReduceOp::kAvg) tensor.div_(state_->size);
    return;
  }
  auto pg = backend_for(*state_, name, bytes_of(tensor));
  guarded(state_->global_rank, name, [&] {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions opts;
    opts.reduceOp = detail::to_c10d(op);
    wait_work(pg->allreduce(tensors, opts));
  });
  if (op == ReduceOp::kAvg) tensor.div_(state_->size);
}

Request ProcessGroup::all_reduce_async(at::Tensor& tensor) {
  const std::string name = "all_reduce_async";
  check_tensor(*state_, name, tensor);
  auto pg = backend_for(*state_, name, bytes_of(tensor));
  auto work = pending(*state_, name);
  work->work = guarded(state_->global_rank, name, [&] {
    std::vector<at::Tensor> tensors{tensor};
    return pg->allreduce(tensors, c10d::AllreduceOptions());
  });
  return Request(std::move(work));
}

void ProcessGroup::broadcast(at::Tensor& tensor, int root) {
  const std::string name = "broadcast";
  check_tensor(*state_, name, tensor);
  check_peer(*state_, name, root);
  auto pg = backend_for(*state_, name, bytes_of(tensor));
  guarded(state_->global_rank, name, [&] {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    wait_work(pg->broadcast(tensors, opts));
  });
}

void ProcessGroup::reduce(at::Tensor& tensor, int root, ReduceOp op) {
  const std::string name = "reduce";
  check_tensor(*state_, name, tensor);
  check_peer(*state_, name, root);
  check_avg(*state_, name, op, tensor);
  auto pg = backend_for(*state_, name, bytes_of(tensor));
  guarded(state_->global_rank, name, [&] {
    std::vector<at::Tensor> tensors{tensor};
    c10d::ReduceOptions opts;
    opts.rootRank = root;
    opts.reduceOp = detail::to_c10d(op);
    wait_work(pg->reduce(tensors, opts));
  });
  if (op == ReduceOp::kAvg && rank() == root) tensor.div_(state_->size);
}

std::vector<at::Tensor> ProcessGroup::all_gather(const at::Tensor& tensor) {
  const std::string name = "all_gather";
  Padded padded = pad_for_gather(*state_, name, tensor);
  if (padded.input.numel() == 0) {  // every rank's tensor is empty: nothing to send
    return trim(std::vector<at::Tensor>(state_->size, padded.input), padded);
  }
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int i = 0; i < state_->size; ++i) outputs[0].push_back(torch::empty_like(padded.input));
  auto pg = backend_for(*state_, name, bytes_of(padded.input));
  guarded(state_->global_rank, name, [&] {
    std::vector<at::Tensor> inputs{padded.input};
    wait_work(pg->allgather(outputs, inputs, c10d::AllgatherOptions()));
  });
  return trim(std::move(outputs[0]), padded);
}

std::vector<at::Tensor> ProcessGroup::gather(const at::Tensor& tensor, int root) {
  const std::string name = "gather";
  check_peer(*state_, name, root);
  Padded padded = pad_for_gather(*state_, name, tensor);
  if (padded.input.numel() == 0) {
    if (rank() != root) return {};
    return trim(std::vector<at::Tensor>(state_->size, padded.input), padded);
  }
  std::vector<std::vector<at::Tensor>> outputs;
  if (rank() == root) {
    outputs.resize(1);
    for (int i = 0; i < state_->size; ++i) outputs[0].push_back(torch::empty_like(padded.input));
  }
  auto pg = backend_for(*state_, name, bytes_of(padded.input));
  guarded(state_->global_rank, name, [&] {
    std::vector<at::Tensor> inputs{padded.input};
    c10d::GatherOptions opts;
    opts.rootRank = root;
    wait_work(pg->gather(outputs, inputs, opts));
  });
  if (rank() != root) return {};
  return trim(std::move(outputs[0]), padded);
}

at::Tensor ProcessGroup::reduce_scatter(const at::Tensor& input, ReduceOp op) {
  const std::string name = "reduce_scatter";
  check_tensor(*state_, name, input);
  check_avg(*state_, name, op, input);
  const int n = state_->size;
  if (input.dim() == 0 || input.size(0) % n != 0) {
    throw Error(state_->global_rank, name,
                "input.size(0) must be a multiple of the group size " + std::to_string(n) +
                    " (got shape " + c10::str(input.sizes()) + ")");
  }
  // Gloo (LibTorch 1.13) has no reduce_scatter: an all-to-all moves chunk r to rank r, which
  // then reduces the n chunks it received. Same bytes per rank as a ring reduce-scatter.
  auto chunks = input.chunk(n, 0);
  auto received = all_to_all(std::vector<at::Tensor>(chunks.begin(), chunks.end()));
  return reduce_list(received, op);
}

std::vector<at::Tensor> ProcessGroup::all_to_all(const std::vector<at::Tensor>& inputs) {
  const std::string name = "all_to_all";
  const int n = state_->size;
  if (static_cast<int>(inputs.size()) != n) {
    throw Error(state_->global_rank, name,
                "needs one input per rank: got " + std::to_string(inputs.size()) +
                    " tensors for a group of size " + std::to_string(n));
  }
  for (const auto& t : inputs) {
    if (!t.defined() || t.dim() == 0) {
      throw Error(state_->global_rank, name, "every input must be a tensor of at least 1 dim");
    }
    if (t.sizes().slice(1) != inputs[0].sizes().slice(1) || t.dtype() != inputs[0].dtype()) {
      throw Error(state_->global_rank, name,
                  "inputs must share dtype and every dimension but the first");
    }
  }
  auto pg = backend_for(*state_, name);
  // Rows each rank sends to each other rank: an all-to-all of counts first.
  auto send_rows = torch::empty({n}, torch::kLong);
  for (int j = 0; j < n; ++j) send_rows[j] = inputs[j].size(0);
  send_rows = send_rows.to(state_->device);
  auto recv_rows = torch::empty({n}, send_rows.options());
  std::vector<int64_t> ones(static_cast<std::size_t>(n), 1);
  // c10d moves the split vectors into its work: every call gets copies.
  guarded(state_->global_rank, name + " (exchanging sizes)", [&] {
    std::vector<int64_t> out_ones = ones, in_ones = ones;
    wait_work(pg->alltoall_base(recv_rows, send_rows, out_ones, in_ones, c10d::AllToAllOptions()));
  });
  send_rows = send_rows.cpu();
  recv_rows = recv_rows.cpu();
  std::vector<int64_t> in_split(send_rows.data_ptr<int64_t>(), send_rows.data_ptr<int64_t>() + n);
  std::vector<int64_t> out_split(recv_rows.data_ptr<int64_t>(), recv_rows.data_ptr<int64_t>() + n);
  at::Tensor flat_in = torch::cat(inputs, 0).contiguous();
  auto out_shape = inputs[0].sizes().vec();
  out_shape[0] = std::accumulate(out_split.begin(), out_split.end(), int64_t{0});
  at::Tensor flat_out = torch::empty(out_shape, flat_in.options());
  backend_for(*state_, name, bytes_of(flat_in));
  guarded(state_->global_rank, name, [&] {
    std::vector<int64_t> out_counts = out_split, in_counts = in_split;
    wait_work(pg->alltoall_base(flat_out, flat_in, out_counts, in_counts, c10d::AllToAllOptions()));
  });
  std::vector<at::Tensor> out;
  int64_t offset = 0;
  for (int64_t rows : out_split) {
    out.push_back(flat_out.narrow(0, offset, rows));
    offset += rows;
  }
  return out;
}

void ProcessGroup::scatter(at::Tensor& output, const std::vector<at::Tensor>& inputs, int root) {
  const std::string name = "scatter";
  check_tensor(*state_, name, output);
  check_peer(*state_, name, root);
  std::vector<std::vector<at::Tensor>> input_lists;
  if (rank() == root) {
    if (static_cast<int>(inputs.size()) != state_->size) {
      throw Error(state_->global_rank, name,
                  "root needs one input per rank: got " + std::to_string(inputs.size()) +
                      " for a group of size " + std::to_string(state_->size));
    }
    for (const auto& t : inputs) {
      check_tensor(*state_, name, t);
      if (t.sizes() != output.sizes() || t.dtype() != output.dtype()) {
        throw Error(state_->global_rank, name, "every input must match the output's shape/dtype");
      }
    }
    input_lists.push_back(inputs);
  }
  auto pg = backend_for(*state_, name, rank() == root ? bytes_of(output) * state_->size : 0);
  guarded(state_->global_rank, name, [&] {
    std::vector<at::Tensor> outputs{output};
    c10d::ScatterOptions opts;
    opts.rootRank = root;
    wait_work(pg->scatter(outputs, input_lists, opts));
  });
}

void ProcessGroup::barrier() {
  auto pg = backend_for(*state_, "barrier");
  guarded(state_->global_rank, "barrier", [&] { wait_work(pg->barrier(c10d::BarrierOptions())); });
}

// ---------------------------------------------------------------- bytes

std::string ProcessGroup::broadcast_bytes(const std::string& bytes, int root) {
  const auto on_device = torch::TensorOptions(torch::kLong).device(state_->device);
  auto length = torch::full({1}, static_cast<int64_t>(bytes.size()), on_device);
  broadcast(length, root);
  at::Tensor payload = rank() == root
                           ? bytes_to_tensor(bytes, state_->device)
                           : torch::empty({length.item<int64_t>()}, on_device.dtype(torch::kUInt8));
  if (payload.numel() > 0) broadcast(payload, root);
  return tensor_to_bytes(payload);
}

std::vector<std::string> ProcessGroup::all_gather_bytes(const std::string& bytes) {
  std::vector<std::string> out;
  for (const auto& t : all_gather(bytes_to_tensor(bytes, state_->device))) {
    out.push_back(tensor_to_bytes(t));
  }
  return out;
}

std::vector<std::string> ProcessGroup::gather_bytes(const std::string& bytes, int root) {
  std::vector<std::string> out;
  for (const auto& t : gather(bytes_to_tensor(bytes, state_->device), root)) {
    out.push_back(tensor_to_bytes(t));
  }
  return out;
}

// ---------------------------------------------------------------- point-to-point

void ProcessGroup::send(const at::Tensor& tensor, int dst, int tag) {
  isend(tensor, dst, tag).wait();
}

void ProcessGroup::recv(at::Tensor& tensor, int src, int tag) { irecv(tensor, src, tag).wait(); }

Request ProcessGroup::isend(const at::Tensor& tensor, int dst, int tag) {
  const std::string name = "send to rank " + std::to_string(dst);
  check_tensor(*state_, name, tensor);
  check_peer(*state_, name, dst);
  auto pg = backend_for(*state_, name, bytes_of(tensor));
  auto work = pending(*state_, name);
  work->work = guarded(state_->global_rank, name, [&] {
    std::vector<at::Tensor> tensors{tensor};
    return pg->send(tensors, dst, tag);
  });
  return Request(std::move(work));
}

Request ProcessGroup::irecv(at::Tensor& tensor, int src, int tag) {
  const std::string name = "recv from rank " + std::to_string(src);
  check_tensor(*state_, name, tensor);
  check_peer(*state_, name, src);
  auto pg = backend_for(*state_, name);
  auto work = pending(*state_, name);
  work->work = guarded(state_->global_rank, name, [&] {
    std::vector<at::Tensor> tensors{tensor};
    return pg->recv(tensors, src, tag);
  });
  return Request(std::move(work));
}

}  // namespace ddp
