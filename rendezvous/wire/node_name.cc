#include "rendezvous/wire/node_name.h"

#include <algorithm>

namespace ddprun::rdzv {
namespace {

bool all_digits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Where "<pid>:<random>" begins in an agent's node id (the colon before the pid); npos for
// any other id.
std::size_t pid_separator(std::string_view node_id) {
  const std::size_t last = node_id.rfind(':');
  if (last == std::string_view::npos || last == 0) return std::string_view::npos;
  const std::size_t middle = node_id.rfind(':', last - 1);
  if (middle == std::string_view::npos || middle == 0) return std::string_view::npos;
  const std::string_view pid = node_id.substr(middle + 1, last - middle - 1);
  if (!all_digits(pid) || !all_digits(node_id.substr(last + 1))) return std::string_view::npos;
  return middle;
}

}  // namespace

std::string node_display_name(std::string_view node_id) {
  if (pid_separator(node_id) == std::string_view::npos) return std::string(node_id);
  return std::string(node_id.substr(0, node_id.rfind(':')));
}

std::string node_host(std::string_view node_id) {
  const std::size_t separator = pid_separator(node_id);
  if (separator == std::string_view::npos) return std::string(node_id);
  return std::string(node_id.substr(0, separator));
}

}  // namespace ddprun::rdzv
