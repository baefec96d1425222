#include "ddp/snapshot.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "ddp/error.h"
#include "ddp/process_group.h"
#include "snapshot_format.h"

namespace ddp {
namespace {

namespace fs = std::filesystem;
constexpr const char* kSaveOp = "snapshot.save";
constexpr const char* kLoadOp = "snapshot.load";
constexpr std::string_view kPrefix = "snapshot-";
constexpr std::string_view kSuffix = ".ddpsnap";
constexpr std::string_view kTempPrefix = ".tmp-snapshot-";

std::string file_name(int64_t global_step) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%012lld", static_cast<long long>(global_step));
  return std::string(kPrefix) + digits + std::string(kSuffix);
}

// The global step a complete snapshot's name encodes, or -1 for any other file.
int64_t step_of(const fs::path& path) {
  const std::string name = path.filename().string();
  if (name.size() != kPrefix.size() + 12 + kSuffix.size() || name.rfind(kPrefix, 0) != 0 ||
      name.substr(name.size() - kSuffix.size()) != kSuffix) {
    return -1;
  }
  const std::string digits = name.substr(kPrefix.size(), 12);
  if (!std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  return std::stoll(digits);
}

std::string errno_text(const std::string& what, const fs::path& path) {
  return what + " " + path.string() + ": " + std::strerror(errno);
}

// Writes `bytes` to `path` durably: created exclusively, fully written, fsynced.
void write_durably(const fs::path& path, const std::string& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(errno_text("cannot create", path));
  std::size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string message = errno_text("cannot write", path);
      ::close(fd);
      throw std::runtime_error(message);
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    std::string message = errno_text("cannot fsync", path);
    ::close(fd);
    throw std::runtime_error(message);
  }
  if (::close(fd) != 0) throw std::runtime_error(errno_text("cannot close", path));
}

// Makes a rename in `dir` durable.
void fsync_directory(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(errno_text("cannot open directory", dir));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw std::runtime_error(errno_text("cannot fsync directory", dir));
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(errno_text("cannot open", path));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
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

// The states of every rank's generators, gathered on rank 0 (collective).
std::vector<std::pair<std::string, at::Tensor>> gather_rng_states(ProcessGroup& group) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  // RNG states are CPU byte tensors; an NCCL group moves them through its device.
  auto gather = [&](at::Tensor state) {
    auto all = group.gather(state.to(group.device()), 0);
    for (auto& t : all) t = t.cpu();
    return all;
  };
  auto cpu = gather(rng_state(at::detail::getDefaultCPUGenerator()));
  for (std::size_t r = 0; r < cpu.size(); ++r) out.emplace_back(rng_key("cpu", r), cpu[r]);
  if (auto device = cuda_rng_device(group)) {
    auto cuda = gather(rng_state(at::globalContext().defaultGenerator(*device)));
    for (std::size_t r = 0; r < cuda.size(); ++r) out.emplace_back(rng_key("cuda", r), cuda[r]);
  }
  return out;
}

// Fault injection for the SDK's own tests, through the environment so that no test hook is
// part of the library's ABI: with DDP_TEST_FAILPOINT=kill_before_snapshot_rename, the process
// SIGKILLs itself once a snapshot's temp file is durable, just before the rename that
// publishes it. Read at each save (a test sets it between two saves); programs never set it.
void fail_point_before_rename() {
  const char* fail_point = std::getenv("DDP_TEST_FAILPOINT");
  if (fail_point && std::strcmp(fail_point, "kill_before_snapshot_rename") == 0) {
    ::raise(SIGKILL);
  }
}

}  // namespace

Snapshotter::Snapshotter(std::shared_ptr<ProcessGroup> group, SnapshotOptions options)
    : group_(std::move(group)), options_(std::move(options)) {
  if (!group_) throw Error(-1, "Snapshotter", "the process group is null");
  if (options_.directory.empty()) {
    throw Error(group_->global_rank(), "Snapshotter", "SnapshotOptions::directory is empty");
  }
  options_.keep_last = std::max<std::size_t>(options_.keep_last, 1);
}

std::vector<fs::path> Snapshotter::list() const {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.directory, ec)) {
    const int64_t step = step_of(entry.path());
    if (step >= 0) found.emplace_back(step, entry.path());
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<fs::path> out;
  for (auto& item : found) out.push_back(std::move(item.second));
  return out;
}

fs::path Snapshotter::save(const torch::nn::Module& model, const torch::optim::Optimizer* optimizer,
                           const TrainingProgress& progress) {
  auto rng = gather_rng_states(*group_);
  const fs::path target = options_.directory / file_name(progress.global_step);
  std::string failure;
  if (group_->is_primary()) {
    try {
      torch::serialize::OutputArchive archive;
      torch::serialize::OutputArchive model_archive;
      model.save(model_archive);
      archive.write("model", model_archive);
      if (optimizer != nullptr) {
        torch::serialize::OutputArchive optimizer_archive;
        optimizer->save(optimizer_archive);
        archive.write("optimizer", optimizer_archive);
      }
      for (auto& [key, state] : rng) archive.write(key, state);
      std::ostringstream payload;
      archive.save_to(payload);

      detail::SnapshotHeader header;
      header.epoch = progress.epoch;
      header.step_in_epoch = progress.step_in_epoch;
      header.global_step = progress.global_step;
      header.world_size = group_->size();
      header.user = progress.user;
      const std::string bytes = detail::encode_snapshot(header, payload.str());

      fs::create_directories(options_.directory);
      // Only rank 0 writes, so any temp file here is left over from a writer that died.
      for (const auto& entry : fs::directory_iterator(options_.directory)) {
        if (entry.path().filename().string().rfind(kTempPrefix, 0) == 0) fs::remove(entry.path());
      }
      const fs::path temp =
          options_.directory / (std::string(kTempPrefix) + std::to_string(progress.global_step) +
                                "-" + std::to_string(::getpid()));
      write_durably(temp, bytes);
      fail_point_before_rename();
      fs::rename(temp, target);
      fsync_directory(options_.directory);
      auto all = list();
      for (std::size_t i = options_.keep_last; i < all.size(); ++i) fs::remove(all[i]);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  // The broadcast doubles as the barrier: the others return once rank 0 has published.
  at::Tensor status = torch::tensor({failure.empty() ? 0 : 1}, torch::kInt).to(group_->device());
  group_->broadcast(status, 0);
  if (!failure.empty()) {
    throw Error(group_->global_rank(), kSaveOp, "writing " + target.string() + ": " + failure);
  }
  if (status.item<int>() != 0) {
    throw Error(group_->global_rank(), kSaveOp,
                "rank 0 failed to write " + target.string() + " (see rank 0's error)");
  }
  return target;
}

// Loads one snapshot file into model, optimizer and this rank's RNG. Returns "" on success,
// else what is wrong (the model may then be partly loaded: a later load overwrites it).
std::string Snapshotter::load_file(const fs::path& path, torch::nn::Module& model,
                                   torch::optim::Optimizer* optimizer, TrainingProgress* out) {
  const int rank = group_->global_rank();
  try {
    if (!fs::exists(path)) return "missing on this rank";
    const std::string bytes = read_file(path);
    auto decoded = detail::decode_snapshot(bytes);
    if (!decoded.ok()) return decoded.error_message();
    std::istringstream payload{std::string(decoded->payload)};
    torch::serialize::InputArchive archive;
    archive.load_from(payload);
    torch::serialize::InputArchive model_archive;
    archive.read("model", model_archive);
    model.load(model_archive);
    if (optimizer != nullptr) {
      torch::serialize::InputArchive optimizer_archive;
      if (archive.try_read("optimizer", optimizer_archive)) optimizer->load(optimizer_archive);
    }
    // A job resumed with another world size reuses rank 0's RNG state on the extra ranks.
    at::Tensor state;
    const int saved_rank = rank < decoded->header.world_size ? rank : 0;
    if (archive.try_read(rng_key("cpu", saved_rank), state)) {
      set_rng_state(at::detail::getDefaultCPUGenerator(), state);
    }
    if (auto device = cuda_rng_device(*group_)) {
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

std::optional<TrainingProgress> Snapshotter::load_latest(torch::nn::Module& model,
                                                         torch::optim::Optimizer* optimizer) {
  warnings_.clear();
  const int rank = group_->global_rank();
  // The candidates: every step any rank sees, newest first. A file some rank lacks is a
  // problem to report, not a reason for that rank to load something older on its own.
  std::vector<int64_t> local;
  for (const auto& path : list()) local.push_back(step_of(path));
  std::set<int64_t, std::greater<>> steps;
  const at::Tensor mine = torch::tensor(local, torch::kLong).to(group_->device());
  for (const auto& seen_on_device : group_->all_gather(mine)) {
    const at::Tensor seen = seen_on_device.cpu();
    for (int64_t i = 0; i < seen.numel(); ++i) steps.insert(seen[i].item<int64_t>());
  }
  for (int64_t step : steps) {
    const fs::path path = options_.directory / file_name(step);
    TrainingProgress progress;
    const std::string problem = load_file(path, model, optimizer, &progress);
    // Loaded only if loaded everywhere.
    at::Tensor ok = torch::tensor({problem.empty() ? 1 : 0}, torch::kInt).to(group_->device());
    group_->all_reduce(ok, ReduceOp::kMin);
    if (ok.item<int>() == 1) return progress;
    const auto problems = group_->all_gather_bytes(problem);
    for (std::size_t r = 0; r < problems.size(); ++r) {
      if (problems[r].empty()) continue;
      warnings_.push_back(path.string() + ": rank " + std::to_string(r) + ": " + problems[r]);
      if (group_->is_primary()) {
        std::cerr << "ddp rank " << rank << ": " << kLoadOp << ": skipping " << path.string()
                  << ": rank " << r << ": " << problems[r] << "; trying the previous snapshot\n";
      }
    }
  }
  if (steps.empty()) return std::nullopt;
  std::string details;
  for (const auto& w : warnings_) details += "\n  " + w;
  throw Error(rank, kLoadOp,
              "no snapshot in " + options_.directory.string() + " is readable by every rank:" +
                  details + "\nmove the directory away to start from scratch");
}

}  // namespace ddp
