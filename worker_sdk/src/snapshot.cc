#include "ddp/snapshot.h"

#include <algorithm>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "ddp/error.h"
#include "ddp/process_group.h"
#include "snapshot_files.h"
#include "snapshot_format.h"
#include "snapshot_state_copy.h"
#include "snapshot_transfer.h"
#include "snapshot_writer.h"

namespace ddp {
namespace {

namespace fs = std::filesystem;
constexpr const char* kSaveOp = "snapshot.save";
constexpr const char* kLoadOp = "snapshot.load";
constexpr std::string_view kNodePlaceholder = "{node}";

fs::path expand_node(const fs::path& directory, int group_rank) {
  std::string text = directory.string();
  for (auto at = text.find(kNodePlaceholder); at != std::string::npos;
       at = text.find(kNodePlaceholder)) {
    text.replace(at, kNodePlaceholder.size(), std::to_string(group_rank));
  }
  return text;
}

std::string rng_key(const char* device, int rank) {
  return std::string("rng_") + device + "_" + std::to_string(rank);
}

std::optional<at::Device> cuda_rng_device(const ProcessGroup& group) {
  if (!torch::cuda::is_available()) return std::nullopt;
  const int count = static_cast<int>(torch::cuda::device_count());
  return at::Device(at::kCUDA,
                    static_cast<c10::DeviceIndex>(group.launch_env().local_rank % count));
}

at::Tensor rng_state(at::Generator generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_rng_state(at::Generator generator, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

using RngStates = std::vector<std::pair<std::string, at::Tensor>>;

// Every rank's generator states, on every rank (collective): each node's writer needs them
// all, since any node's copy may be the one the whole job resumes from.
RngStates gather_rng_states(ProcessGroup& group) {
  RngStates out;
  // RNG states are CPU byte tensors; an NCCL group moves them through its device.
  auto gather = [&](const char* kind, at::Tensor state) {
    auto all = group.all_gather(state.to(group.device()));
    for (std::size_t r = 0; r < all.size(); ++r) out.emplace_back(rng_key(kind, r), all[r].cpu());
  };
  gather("cpu", rng_state(at::detail::getDefaultCPUGenerator()));
  if (auto device = cuda_rng_device(group)) {
    gather("cuda", rng_state(at::globalContext().defaultGenerator(*device)));
  }
  return out;
}

// The snapshot's payload: LibTorch's archive of "model", "optimizer" (written by
// `write_state`) and every rank's RNG state.
std::string serialise(const std::function<void(torch::serialize::OutputArchive&)>& write_state,
                      const RngStates& rng) {
  torch::serialize::OutputArchive archive;
  write_state(archive);
  for (const auto& [key, state] : rng) archive.write(key, state);
  // Appended straight into the string the writer takes over: no stream buffer and no copy out
  // of it (a snapshot is as large as the model and optimizer).
  std::string payload;
  archive.save_to([&payload](const void* data, std::size_t size) {
    payload.append(static_cast<const char*>(data), size);
    return size;
  });
  return payload;
}

void write_live_state(torch::serialize::OutputArchive& archive, const torch::nn::Module& model,
                      const torch::optim::Optimizer* optimizer) {
  torch::serialize::OutputArchive model_archive;
  model.save(model_archive);
  archive.write("model", model_archive);
  if (optimizer != nullptr) {
    torch::serialize::OutputArchive optimizer_archive;
    optimizer->save(optimizer_archive);
    archive.write("optimizer", optimizer_archive);
  }
}

// What this rank's writer publishes. With `copy_only`, only a copy of the state is taken here
// and serialising it is left to the writer thread (make_payload); otherwise (or when the
// optimizer cannot be copied, see snapshot_state_copy.h) it is serialised now.
detail::SnapshotWrite prepare_write(const torch::nn::Module& model,
                                    const torch::optim::Optimizer* optimizer, RngStates rng,
                                    const TrainingProgress& progress, int world_size,
                                    bool copy_only) {
  detail::SnapshotWrite write;
  write.header.epoch = progress.epoch;
  write.header.step_in_epoch = progress.step_in_epoch;
  write.header.global_step = progress.global_step;
  write.header.world_size = world_size;
  write.header.user = progress.user;
  std::optional<detail::StateCopy> copy;
  if (copy_only) copy = detail::StateCopy::take(model, optimizer);
  if (!copy) {
    write.payload = serialise(
        [&](torch::serialize::OutputArchive& a) { write_live_state(a, model, optimizer); }, rng);
    return write;
  }
  write.make_payload = [copy = std::make_shared<detail::StateCopy>(std::move(*copy)),
                        rng = std::move(rng)] {
    try {
      return serialise([&](torch::serialize::OutputArchive& a) { copy->write(a); }, rng);
    } catch (const c10::Error& e) {
      throw std::runtime_error(e.what_without_backtrace());
    }
  };
  return write;
}

// "" when `path` holds an intact snapshot (its bytes then in *bytes), else what is wrong.
std::string check_copy(const fs::path& path, std::string* bytes) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return "missing on this rank";
  std::string error;
  *bytes = detail::read_whole_file(path, &error);
  if (!error.empty()) return error;
  auto decoded = detail::decode_snapshot(*bytes);
  return decoded.ok() ? "" : decoded.error_message();
}

// Collective: throws on every rank when any rank's `error` is not empty.
void raise_if_any_failed(ProcessGroup& group, const std::string& error, const std::string& what) {
  const auto errors = group.all_gather_bytes(error);
  std::string details;
  for (std::size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r].empty()) details += "; rank " + std::to_string(r) + ": " + errors[r];
  }
  if (details.empty()) return;
  throw Error(group.global_rank(), kSaveOp,
              what + " failed" + details + " (the previous snapshots are intact)");
}

}  // namespace

struct Snapshotter::Impl {
  detail::SnapshotWriter writer;
  // A background save was issued and not yet checked collectively. The same on every rank:
  // every rank calls save()/wait() in the same order.
  bool pending = false;
  std::string deferred_error;  // serialising for the pending write failed on this rank
  bool identified = false;
  bool writes = false;  // this rank is its directory's writer (lowest rank that sees it)
};

Snapshotter::Snapshotter(std::shared_ptr<ProcessGroup> group, SnapshotOptions options)
    : group_(std::move(group)), options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  if (!group_) throw Error(-1, "Snapshotter", "the process group is null");
  if (options_.directory.empty()) {
    throw Error(group_->global_rank(), "Snapshotter", "SnapshotOptions::directory is empty");
  }
  options_.directory = expand_node(options_.directory, group_->launch_env().group_rank);
  options_.keep_last = std::max<std::size_t>(options_.keep_last, 1);
}

Snapshotter::~Snapshotter() = default;

std::vector<fs::path> Snapshotter::list() {
  impl_->writer.join();
  return detail::list_snapshots(options_.directory);
}

void Snapshotter::wait() {
  if (!impl_->pending) return;
  impl_->pending = false;
  std::string error = impl_->writer.finish();
  if (error.empty()) error.swap(impl_->deferred_error);
  impl_->deferred_error.clear();
  raise_if_any_failed(*group_, error, "a background write of a snapshot");
}

// Collective, once: which ranks share a directory, so that each has exactly one writer.
void Snapshotter::identify() {
  if (impl_->identified) return;
  std::string error;
  std::string identity = detail::directory_identity(options_.directory, &error);
  // A directory that cannot be created is nobody else's: this rank writes (and fails, saying
  // why) rather than leave it without a writer.
  if (identity.empty()) identity = "unusable:" + std::to_string(group_->rank());
  const auto all = group_->all_gather_bytes(identity);
  const int first = static_cast<int>(std::find(all.begin(), all.end(), identity) - all.begin());
  impl_->writes = first == group_->rank();
  impl_->identified = true;
}

fs::path Snapshotter::save(const torch::nn::Module& model, const torch::optim::Optimizer* optimizer,
                           const TrainingProgress& progress) {
  wait();
  identify();
  RngStates rng = gather_rng_states(*group_);
  const fs::path target = options_.directory / detail::snapshot_file_name(progress.global_step);
  detail::SnapshotWrite write;
  std::string error;
  if (impl_->writes) {
    try {
      write = prepare_write(model, optimizer, std::move(rng), progress, group_->size(),
                            options_.background && options_.serialise_in_background);
      write.directory = options_.directory;
      write.keep_last = options_.keep_last;
    } catch (const c10::Error& e) {
      error = e.what_without_backtrace();
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (options_.background) {
    if (impl_->writes && error.empty()) impl_->writer.start(std::move(write));
    impl_->deferred_error = error;
    impl_->pending = true;
    return target;
  }
  if (impl_->writes && error.empty()) error = detail::write_snapshot(write);
  // Doubles as the barrier: every rank returns once every writer has published.
  raise_if_any_failed(*group_, error, "writing " + target.filename().string());
  return target;
}

namespace {

// Loads decoded snapshot bytes into model, optimizer and this rank's RNG. Returns "" on
// success, else what is wrong (the model may then be partly loaded: a later load overwrites it).
std::string restore(const std::string& bytes, const ProcessGroup& group, torch::nn::Module& model,
                    torch::optim::Optimizer* optimizer, TrainingProgress* out) {
  try {
    auto decoded = detail::decode_snapshot(bytes);
    if (!decoded.ok()) return decoded.error_message();
    torch::serialize::InputArchive archive;
    // Read in place from the file's bytes (a stream would copy them twice).
    archive.load_from(decoded->payload.data(), decoded->payload.size());
    torch::serialize::InputArchive model_archive;
    archive.read("model", model_archive);
    model.load(model_archive);
    if (optimizer != nullptr) {
      torch::serialize::InputArchive optimizer_archive;
      if (archive.try_read("optimizer", optimizer_archive)) optimizer->load(optimizer_archive);
    }
    // A job resumed with another world size reuses rank 0's RNG state on the extra ranks.
    const int rank = group.rank();
    const int saved_rank = rank < decoded->header.world_size ? rank : 0;
    at::Tensor state;
    if (archive.try_read(rng_key("cpu", saved_rank), state)) {
      set_rng_state(at::detail::getDefaultCPUGenerator(), state);
    }
    if (auto device = cuda_rng_device(group)) {
      if (archive.try_read(rng_key("cuda", saved_rank), state)) {
        set_rng_state(at::globalContext().defaultGenerator(*device), state);
      }
    }
    *out = TrainingProgress{decoded->header.epoch, decoded->header.step_in_epoch,
                            decoded->header.global_step, decoded->header.user};
    return "";
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  }
}

int first_empty(const std::vector<std::string>& problems) {
  for (std::size_t r = 0; r < problems.size(); ++r) {
    if (problems[r].empty()) return static_cast<int>(r);
  }
  return -1;
}

}  // namespace

// Every step any rank sees, newest first (collective). A file some rank lacks is a copy to
// send it, not a reason for that rank to load something older on its own.
std::vector<int64_t> Snapshotter::candidate_steps() {
  std::vector<int64_t> local;
  for (const auto& path : detail::list_snapshots(options_.directory)) {
    local.push_back(detail::snapshot_step_of(path));
  }
  std::set<int64_t, std::greater<>> steps;
  const at::Tensor mine = torch::tensor(local, torch::kLong).to(group_->device());
  for (const auto& seen_on_device : group_->all_gather(mine)) {
    const at::Tensor seen = seen_on_device.cpu();
    for (int64_t i = 0; i < seen.numel(); ++i) steps.insert(seen[i].item<int64_t>());
  }
  return {steps.begin(), steps.end()};
}

void Snapshotter::warn(const fs::path& path, const std::vector<std::string>& problems,
                       const std::string& suffix) {
  for (std::size_t r = 0; r < problems.size(); ++r) {
    if (problems[r].empty()) continue;
    warnings_.push_back(path.string() + ": rank " + std::to_string(r) + ": " + problems[r] +
                        suffix);
    if (group_->is_primary()) {
      std::cerr << "ddp rank " << group_->global_rank() << ": " << kLoadOp << ": "
                << warnings_.back() << "\n";
    }
  }
}

// Collective: sends the copy of `holder` to every rank whose copy is missing or damaged (its
// directory's writer stores it), then rereads it here when this rank's was one of them.
std::string Snapshotter::receive_copy(int64_t step, int holder,
                                      const std::vector<std::string>& problems,
                                      std::string* bytes) {
  const fs::path path = options_.directory / detail::snapshot_file_name(step);
  const bool needed = !problems[group_->rank()].empty();
  detail::FileTransfer transfer;
  transfer.root = holder;
  transfer.source = path;
  transfer.store = needed && impl_->writes;
  transfer.directory = options_.directory;
  transfer.global_step = step;
  transfer.keep_last = options_.keep_last;
  const std::string stored = detail::transfer_snapshot(*group_, transfer);
  // Also the barrier: every stored copy is published before any rank rereads it.
  const auto store_errors = group_->all_gather_bytes(stored);
  warn(path, problems, "; received from rank " + std::to_string(holder));
  warn(path, store_errors, " (storing the received copy)");
  if (!needed) return "";
  std::string problem = check_copy(path, bytes);
  return problem.empty() ? "" : "after receiving a copy: " + problem;
}

// Collective: loads `step` on every rank or on none (then warnings say why, and nullopt).
std::optional<TrainingProgress> Snapshotter::load_step(int64_t step, torch::nn::Module& model,
                                                       torch::optim::Optimizer* optimizer) {
  const fs::path path = options_.directory / detail::snapshot_file_name(step);
  std::string bytes;
  std::string problem = check_copy(path, &bytes);
  const auto problems = group_->all_gather_bytes(problem);
  const int holder = first_empty(problems);
  if (holder < 0) {
    warn(path, problems, "");
    return std::nullopt;
  }
  if (std::any_of(problems.begin(), problems.end(), [](const auto& p) { return !p.empty(); })) {
    problem = receive_copy(step, holder, problems, &bytes);
  }
  TrainingProgress progress;
  if (problem.empty()) problem = restore(bytes, *group_, model, optimizer, &progress);
  // Loaded only if loaded everywhere.
  at::Tensor ok = torch::tensor({problem.empty() ? 1 : 0}, torch::kInt).to(group_->device());
  group_->all_reduce(ok, ReduceOp::kMin);
  if (ok.item<int>() == 1) return progress;
  warn(path, group_->all_gather_bytes(problem), "");
  return std::nullopt;
}

std::optional<TrainingProgress> Snapshotter::load_latest(torch::nn::Module& model,
                                                         torch::optim::Optimizer* optimizer) {
  wait();
  warnings_.clear();
  identify();
  const std::vector<int64_t> steps = candidate_steps();
  for (int64_t step : steps) {
    if (auto progress = load_step(step, model, optimizer)) return progress;
  }
  if (steps.empty()) return std::nullopt;
  std::string details;
  for (const auto& w : warnings_) details += "\n  " + w;
  throw Error(group_->global_rank(), kLoadOp,
              "no snapshot in " + options_.directory.string() + " is intact on any rank:" +
                  details + "\nmove the directory away on every node to start from scratch");
}

}  // namespace ddp
