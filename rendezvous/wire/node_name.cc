#include "rendezvous/wire/node_name.h"

#include <algorithm>

namespace ddprun::rdzv {
namespace {

bool all_digits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string node_display_name(std::string_view node_id) {
  const std::size_t last = node_id.rfind(':');
  if (last == std::string_view::npos || last == 0) return std::string(node_id);
  const std::size_t middle = node_id.rfind(':', last - 1);
  if (middle == std::string_view::npos || middle == 0) return std::string(node_id);
  const std::string_view pid = node_id.substr(middle + 1, last - middle - 1);
  if (!all_digits(pid) || !all_digits(node_id.substr(last + 1))) return std::string(node_id);
  return std::string(node_id.substr(0, last));
}

}  // namespace ddprun::rdzv
