#include "shm_all_reduce.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

namespace ddp::detail {
namespace {

constexpr std::uint32_t kMagic = 0x44445348;  // "DDSH"
constexpr auto kLivenessCheck = std::chrono::milliseconds(100);

std::size_t align_up(std::size_t n) { return (n + 63) / 64 * 64; }

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// futex on a shared mapping: the non-private operations, so other processes see them.
void futex_wake_all(std::atomic<std::uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
}

void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t seen,
                std::chrono::nanoseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000000000),
              static_cast<long>(timeout.count() % 1000000000)};
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

// Whether a process is gone: no such process, or a zombie its parent has not reaped yet.
bool is_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buffer[512];
  const ssize_t n = ::read(fd, buffer, sizeof buffer - 1);
  ::close(fd);
  if (n <= 0) return false;
  buffer[n] = '\0';
  // "pid (comm) state ...": the command may contain spaces and parentheses, the last ')' ends it.
  const char* close = std::strrchr(buffer, ')');
  return close != nullptr && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

template <class T>
void sum_into(char* out, char* const* slots, int world, std::size_t begin, std::size_t end) {
  auto* o = reinterpret_cast<T*>(out);
  const auto* first = reinterpret_cast<const T*>(slots[0]);
  for (std::size_t i = begin; i < end; ++i) o[i] = first[i];
  for (int r = 1; r < world; ++r) {
    const auto* s = reinterpret_cast<const T*>(slots[r]);
    for (std::size_t i = begin; i < end; ++i) o[i] += s[i];
  }
}

}  // namespace

struct ShmAllReduce::Header {
  std::uint32_t magic;
  std::uint32_t world;
  std::uint64_t slot_bytes;
  std::atomic<std::uint32_t> counter[kMaxRanks];  // futex words: the phase each rank reached
  std::atomic<pid_t> pid[kMaxRanks];
};

static_assert(std::atomic<std::uint32_t>::is_always_lock_free, "futex words must be lock-free");

ShmAllReduce::ShmAllReduce(std::string name, int world, int rank, void* base, std::size_t bytes)
    : name_(std::move(name)),
      world_(world),
      rank_(rank),
      base_(base),
      bytes_(bytes),
      header_(static_cast<Header*>(base)),
      slot_bytes_(header_->slot_bytes) {}

ShmAllReduce::~ShmAllReduce() {
  if (owns_name_) ::shm_unlink(name_.c_str());
  ::munmap(base_, bytes_);
}

std::unique_ptr<ShmAllReduce> ShmAllReduce::create(const std::string& name, int world, int rank,
                                                   std::size_t slot_bytes, std::string* error) {
  if (world < 2 || world > kMaxRanks) {
    *error = "shared memory all-reduce supports 2 to " + std::to_string(kMaxRanks) + " ranks";
    return nullptr;
  }
  slot_bytes = align_up(slot_bytes);
  const std::size_t bytes = align_up(sizeof(Header)) + slot_bytes * (world + 1);
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = errno_text("shm_open " + name);
    return nullptr;
  }
  // posix_fallocate reserves the pages now: a full /dev/shm fails here, not with SIGBUS later.
  const int rc = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0
                     ? ::posix_fallocate(fd, 0, static_cast<off_t>(bytes))
                     : errno;
  void* base =
      rc == 0 ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  ::close(fd);
  if (base == MAP_FAILED) {
    *error = "reserving " + std::to_string(bytes) +
             " bytes of shared memory: " + std::strerror(rc != 0 ? rc : errno);
    ::shm_unlink(name.c_str());
    return nullptr;
  }
  auto* header = new (base) Header{};
  header->world = static_cast<std::uint32_t>(world);
  header->slot_bytes = slot_bytes;
  header->pid[rank].store(::getpid());
  std::atomic_thread_fence(std::memory_order_release);
  header->magic = kMagic;
  std::unique_ptr<ShmAllReduce> created(new ShmAllReduce(name, world, rank, base, bytes));
  created->owns_name_ = true;
  return created;
}

std::unique_ptr<ShmAllReduce> ShmAllReduce::attach(const std::string& name, int world, int rank,
                                                   std::string* error) {
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = errno_text("shm_open " + name);
    return nullptr;
  }
  struct stat st {};
  void* base = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && st.st_size >= static_cast<off_t>(sizeof(Header))) {
    base = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED,
                  fd, 0);
  }
  ::close(fd);
  if (base == MAP_FAILED) {
    *error = errno_text("mapping " + name);
    return nullptr;
  }
  auto* header = static_cast<Header*>(base);
  if (header->magic != kMagic || header->world != static_cast<std::uint32_t>(world) || rank <= 0 ||
      rank >= world) {
    ::munmap(base, static_cast<std::size_t>(st.st_size));
    *error = "shared memory segment " + name + " does not match this group";
    return nullptr;
  }
  header->pid[rank].store(::getpid());
  return std::unique_ptr<ShmAllReduce>(
      new ShmAllReduce(name, world, rank, base, static_cast<std::size_t>(st.st_size)));
}

void ShmAllReduce::unlink_name() {
  if (owns_name_) ::shm_unlink(name_.c_str());
  owns_name_ = false;
}

char* ShmAllReduce::slot(int r) const {
  return static_cast<char*>(base_) + align_up(sizeof(Header)) + slot_bytes_ * r;
}

char* ShmAllReduce::result() const { return slot(world_); }

void ShmAllReduce::arrive(std::uint32_t value) {
  header_->counter[rank_].store(value, std::memory_order_release);
  futex_wake_all(&header_->counter[rank_]);
}

ShmOutcome ShmAllReduce::wait_all(std::uint32_t value,
                                  std::chrono::steady_clock::time_point deadline) {
  for (int r = 0; r < world_; ++r) {
    auto& word = header_->counter[r];
    // Counters only grow; the comparison survives wrap-around of the 32-bit sequence.
    for (int spins = 0;; ++spins) {
      const std::uint32_t seen = word.load(std::memory_order_acquire);
      if (static_cast<std::int32_t>(seen - value) >= 0) break;
      if (spins < 64) continue;  // the peer is usually microseconds away
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        return {ShmOutcome::kTimeout, "timed out waiting for rank " + std::to_string(r)};
      }
      const pid_t pid = header_->pid[r].load();
      if (pid > 0 && is_gone(pid)) {
        return {ShmOutcome::kPeerGone,
                "rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") is gone"};
      }
      futex_wait(&word, seen, std::min<std::chrono::nanoseconds>(kLivenessCheck, deadline - now));
    }
  }
  return {};
}

ShmOutcome ShmAllReduce::all_reduce_sum(void* data, std::size_t count, ShmElement type,
                                        std::chrono::steady_clock::time_point deadline) {
  const std::size_t element = type == ShmElement::kFloat32 ? 4 : 8;
  const std::size_t per_chunk = slot_bytes_ / element;
  char* slots[kMaxRanks];
  for (int r = 0; r < world_; ++r) slots[r] = slot(r);
  auto* bytes = static_cast<char*>(data);
  for (std::size_t done = 0; done < count; done += per_chunk) {
    const std::size_t n = std::min(per_chunk, count - done);
    ++seq_;
    std::memcpy(slots[rank_], bytes + done * element, n * element);
    arrive(2 * seq_ - 1);
    if (auto w = wait_all(2 * seq_ - 1, deadline); !w.ok()) return w;
    const std::size_t begin = n * rank_ / world_, end = n * (rank_ + 1) / world_;
    if (type == ShmElement::kFloat32) {
      sum_into<float>(result(), slots, world_, begin, end);
    } else {
      sum_into<double>(result(), slots, world_, begin, end);
    }
    arrive(2 * seq_);
    if (auto w = wait_all(2 * seq_, deadline); !w.ok()) return w;
    std::memcpy(bytes + done * element, result(), n * element);
  }
  return {};
}

}  // namespace ddp::detail
