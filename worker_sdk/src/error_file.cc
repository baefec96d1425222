#include "error_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ddp::detail {
namespace {

// Buffers output to a descriptor in 512-byte chunks; remembers the first write error.
class FdWriter {
 public:
  explicit FdWriter(int fd) : fd_(fd) {}
  ~FdWriter() { flush(); }
  void raw(const char* s) {
    while (*s != '\0') put(*s++);
  }
  // A JSON string body: quotes, backslashes and control characters escaped. Bytes >= 0x80
  // pass through (UTF-8 stays UTF-8; JSON parsers accept it).
  void escaped(const char* s) {
    for (; *s != '\0'; ++s) {
      const auto c = static_cast<unsigned char>(*s);
      switch (c) {
        case '"':
          raw("\\\"");
          break;
        case '\\':
          raw("\\\\");
          break;
        case '\n':
          raw("\\n");
          break;
        case '\r':
          raw("\\r");
          break;
        case '\t':
          raw("\\t");
          break;
        default:
          if (c < 0x20) {
            raw("\\u00");
            put("0123456789abcdef"[c >> 4]);
            put("0123456789abcdef"[c & 0xf]);
          } else {
            put(static_cast<char>(c));
          }
      }
    }
  }
  void decimal(long value) {
    char digits[24];
    int n = 0;
    const bool negative = value < 0;
    unsigned long v =
        negative ? 0UL - static_cast<unsigned long>(value) : static_cast<unsigned long>(value);
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    if (negative) put('-');
    while (n > 0) put(digits[--n]);
  }
  bool flush() {
    std::size_t done = 0;
    while (done < used_ && ok_) {
      const ssize_t n = ::write(fd_, buffer_ + done, used_ - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) ok_ = false;
      if (n > 0) done += static_cast<std::size_t>(n);
    }
    used_ = 0;
    return ok_;
  }

 private:
  void put(char c) {
    if (used_ == sizeof buffer_) flush();
    buffer_[used_++] = c;
  }
  int fd_;
  char buffer_[512];
  std::size_t used_ = 0;
  bool ok_ = true;
};

}  // namespace

std::string error_file_from_env() {
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  return path != nullptr ? std::string(path) : std::string();
}

bool write_error_file(const char* path, const char* message, const char* callstack,
                      long timestamp_seconds) {
  if (path == nullptr || *path == '\0') return false;
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = false;
  {
    FdWriter out(fd);
    out.raw("{\"message\": {\"message\": \"");
    out.escaped(message != nullptr ? message : "");
    out.raw("\", \"extraInfo\": {\"py_callstack\": \"");
    out.escaped(callstack != nullptr ? callstack : "");
    out.raw("\", \"timestamp\": \"");
    out.decimal(timestamp_seconds);
    out.raw("\"}}}\n");
    ok = out.flush();
  }
  const int saved = errno;
  ok = ::close(fd) == 0 && ok;
  if (!ok) errno = saved;
  return ok;
}

}  // namespace ddp::detail
