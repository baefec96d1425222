#include "rendezvous/security/token_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/posix_fd.h"
#include "rendezvous/security/provider.h"

namespace ddprun::rdzv {

Secret::~Secret() { wipe(); }

Secret& Secret::operator=(const Secret& other) {
  if (this != &other) {
    wipe();
    bytes_ = other.bytes_;
  }
  return *this;
}

Secret& Secret::operator=(Secret&& other) noexcept {
  if (this != &other) {
    wipe();
    bytes_ = std::move(other.bytes_);
  }
  return *this;
}

void Secret::wipe() {
  // explicit_bzero: a plain memset before a free may be optimised away.
  if (!bytes_.empty()) ::explicit_bzero(bytes_.data(), bytes_.size());
  bytes_.clear();
}

Result<Secret> load_token_file(const std::string& path) {
  auto where = [&](const std::string& what) {
    return fmt::format("token file {}: {}", path, what);
  };
  // O_NOFOLLOW is not used: a symlink to a private file (systemd's credentials) is fine; the
  // mode checked is the target's, through the descriptor actually read.
  const int raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (raw < 0) {
    const int err = errno;
    if (err == ENOENT) return Status::not_found(where("no such file"));
    return Status::error(where(std::strerror(err)));
  }
  UniqueFd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Status::error(where(std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return Status::invalid_argument(where("not a regular file"));
  if ((st.st_mode & 077) != 0) {
    return Status::refused(where(fmt::format(
        "its group or other users may read or write it (mode {:04o}); a shared secret must be "
        "private to its owner: chmod 600 {}",
        st.st_mode & 07777, path)));
  }
  if (st.st_size > static_cast<off_t>(kMaxTokenBytes) + 64) {
    return Status::invalid_argument(
        where(fmt::format("{} bytes; a token is at most {} bytes", st.st_size, kMaxTokenBytes)));
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd.get(), bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::error(where(std::strerror(errno)));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);
  Secret whole(std::move(bytes));  // wiped however this function returns
  const auto& b = whole.bytes();
  auto is_space = [](uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  size_t begin = 0, end = b.size();
  while (begin < end && is_space(b[begin])) ++begin;
  while (end > begin && is_space(b[end - 1])) --end;
  const size_t length = end - begin;
  if (length == 0) return Status::invalid_argument(where("empty"));
  if (length < kMinTokenBytes) {
    return Status::invalid_argument(
        where(fmt::format("the token is {} bytes; use at least {} (e.g. openssl rand -hex 32 > {})",
                          length, kMinTokenBytes, path)));
  }
  if (length > kMaxTokenBytes) {
    return Status::invalid_argument(
        where(fmt::format("the token is {} bytes; at most {}", length, kMaxTokenBytes)));
  }
  // A token is used for proofs, which need the OpenSSL module: find out now, where the error
  // can name what is missing, not in the middle of a handshake.
  if (auto module = security_provider(); !module) return module.status();
  return Secret(std::vector<uint8_t>(b.begin() + static_cast<std::ptrdiff_t>(begin),
                                     b.begin() + static_cast<std::ptrdiff_t>(end)));
}

}  // namespace ddprun::rdzv
