#include "agent/logs/line_assembler.h"

namespace ddprun::agent {

std::vector<std::string> LineAssembler::feed(std::string_view bytes) {
  std::vector<std::string> lines;
  while (!bytes.empty()) {
    const auto newline = bytes.find('\n');
    const std::size_t take = newline == std::string_view::npos ? bytes.size() : newline + 1;
    pending_.append(bytes.substr(0, take));
    bytes.remove_prefix(take);
    if (newline != std::string_view::npos) {
      lines.push_back(std::move(pending_));
      pending_.clear();
    } else if (pending_.size() >= kMaxLine) {
      pending_.push_back('\n');
      lines.push_back(std::move(pending_));
      pending_.clear();
    }
  }
  return lines;
}

std::string LineAssembler::flush() {
  if (pending_.empty()) return {};
  std::string rest = std::move(pending_);
  pending_.clear();
  rest.push_back('\n');
  return rest;
}

}  // namespace ddprun::agent
