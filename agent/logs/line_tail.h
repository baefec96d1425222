// The last lines of a stream, kept in memory (bounded by lines and bytes): what a worker printed
// just before it failed or hung (its stack dump), for the failure report, when its stderr does
// not go to a log file.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <vector>

namespace ddprun::agent {

// Not thread-safe: the agent's loop writes and reads it.
class LineTail {
 public:
  explicit LineTail(std::size_t max_lines = 200, std::size_t max_bytes = std::size_t{64} * 1024)
      : max_lines_(max_lines), max_bytes_(max_bytes) {}
  // One line, without or with its '\n'.
  void add(std::string line) {
    if (!line.empty() && line.back() == '\n') line.pop_back();
    bytes_ += line.size();
    lines_.push_back(std::move(line));
    while (lines_.size() > max_lines_ || (bytes_ > max_bytes_ && lines_.size() > 1)) {
      bytes_ -= lines_.front().size();
      lines_.pop_front();
    }
  }
  // The last `n` lines kept, oldest first.
  std::vector<std::string> last(std::size_t n) const {
    const std::size_t from = lines_.size() > n ? lines_.size() - n : 0;
    return {lines_.begin() + static_cast<std::ptrdiff_t>(from), lines_.end()};
  }
  bool empty() const { return lines_.empty(); }

 private:
  const std::size_t max_lines_;
  const std::size_t max_bytes_;
  std::deque<std::string> lines_;
  std::size_t bytes_ = 0;
};

}  // namespace ddprun::agent
