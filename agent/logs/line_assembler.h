// Turns a byte stream into whole lines, so that tee'd output is prefixed per line and never
// split or interleaved with another worker's partial line. Pure: no I/O.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::agent {

class LineAssembler {
 public:
  // A line longer than this is emitted in pieces rather than buffered without bound.
  static constexpr std::size_t kMaxLine = std::size_t{64} * 1024;

  // Appends `bytes`; returns the lines they complete, each with its trailing '\n'.
  std::vector<std::string> feed(std::string_view bytes);
  // The unterminated rest (end of stream), with a '\n' added; empty if nothing is pending.
  std::string flush();

 private:
  std::string pending_;
};

}  // namespace ddprun::agent
