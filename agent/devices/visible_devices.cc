#include "agent/devices/visible_devices.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <set>

namespace ddprun::agent::devices {
namespace {

std::string_view trim(std::string_view text) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

std::vector<std::string_view> split_list(std::string_view list) {
  std::vector<std::string_view> entries;
  for (;;) {
    const std::size_t comma = list.find(',');
    entries.push_back(trim(list.substr(0, comma)));
    if (comma == std::string_view::npos) return entries;
    list.remove_prefix(comma + 1);
  }
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// An entry read as CUDA reads it (strtoul over its leading sign and digits): "1gpu" is 1, "-1"
// is -1, and an entry without leading digits is -1 too, which ends the list.
long leading_integer(std::string_view entry) {
  std::size_t digits_from = (!entry.empty() && (entry[0] == '+' || entry[0] == '-')) ? 1 : 0;
  std::size_t end = digits_from;
  while (end < entry.size() && is_digit(entry[end])) ++end;
  if (end == digits_from) return -1;
  long value = 0;
  // Past a long's range is past any device index: the caller trims it as out of range.
  auto [ptr, ec] = std::from_chars(entry.data() + digits_from, entry.data() + end, value);
  if (ec != std::errc()) value = std::numeric_limits<long>::max();
  return entry[0] == '-' ? -value : value;
}

// A whole entry as a non-negative decimal ("12"); nullopt for anything else.
std::optional<int> whole_index(std::string_view entry) {
  int value = 0;
  auto [ptr, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), value);
  if (ec != std::errc() || ptr != entry.data() + entry.size() || entry.empty() || value < 0) {
    return std::nullopt;
  }
  return value;
}

std::vector<ListedDevice> visible_by_index(const std::vector<std::string_view>& entries,
                                           const std::vector<ListedDevice>& candidates) {
  std::vector<long> indices;
  for (std::string_view entry : entries) {
    const long index = leading_integer(entry);
    // torch.cuda reads a repeated index as "no device"; so does ddprun, to count what torch does.
    if (std::find(indices.begin(), indices.end(), index) != indices.end()) return {};
    if (index < 0) break;
    indices.push_back(index);
  }
  std::vector<ListedDevice> visible;
  for (long index : indices) {
    if (index >= static_cast<long>(candidates.size())) break;
    visible.push_back(candidates[static_cast<std::size_t>(index)]);
  }
  return visible;
}

std::vector<ListedDevice> visible_by_uuid(const std::vector<std::string_view>& entries,
                                          const std::vector<ListedDevice>& candidates) {
  const std::string_view prefix = entries.front().substr(0, 4);
  std::vector<std::string_view> listed;
  for (std::string_view entry : entries) {
    if (std::find(listed.begin(), listed.end(), entry) != listed.end()) return {};
    if (entry.substr(0, 4) != prefix) break;
    listed.push_back(entry);
  }
  const bool uuids_known = std::any_of(candidates.begin(), candidates.end(),
                                       [](const ListedDevice& d) { return !d.uuid.empty(); });
  std::vector<ListedDevice> visible;
  if (prefix == "MIG-" || !uuids_known) {
    // Nothing to check them against: each entry is a device, as the runtime would find it.
    const std::size_t bound = prefix == "MIG-" ? listed.size() : candidates.size();
    for (std::size_t i = 0; i < listed.size() && i < bound; ++i) {
      visible.push_back(ListedDevice{std::string(listed[i])});
    }
    return visible;
  }
  std::set<std::size_t> taken;
  for (std::string_view entry : listed) {
    std::optional<std::size_t> match;
    bool ambiguous = false;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      if (candidates[i].uuid.rfind(entry, 0) != 0) continue;
      ambiguous = match.has_value();
      match = i;
      if (ambiguous) break;
    }
    if (!match || ambiguous) break;
    if (!taken.insert(*match).second) return {};
    visible.push_back(candidates[*match]);
  }
  return visible;
}

}  // namespace

std::vector<ListedDevice> cuda_visible(std::string_view list,
                                       const std::vector<ListedDevice>& candidates) {
  const std::vector<std::string_view> entries = split_list(list);
  const std::string_view first = entries.front();
  if (first.rfind("GPU-", 0) == 0 || first.rfind("MIG-", 0) == 0) {
    return visible_by_uuid(entries, candidates);
  }
  return visible_by_index(entries, candidates);
}

ZeHierarchy parse_ze_hierarchy(std::string_view value) {
  return trim(value) == "COMPOSITE" ? ZeHierarchy::kComposite : ZeHierarchy::kFlat;
}

int level_zero_visible(std::string_view mask, const std::vector<int>& tiles_per_card,
                       ZeHierarchy hierarchy) {
  std::vector<int> tiles;
  tiles.reserve(tiles_per_card.size());
  for (int t : tiles_per_card) tiles.push_back(std::max(t, 1));
  int flat_devices = 0;
  for (int t : tiles) flat_devices += t;
  const int devices =
      hierarchy == ZeHierarchy::kFlat ? flat_devices : static_cast<int>(tiles.size());
  if (trim(mask).empty()) return devices;

  std::set<int> shown;
  for (std::string_view entry : split_list(mask)) {
    const std::size_t dot = entry.find('.');
    const std::optional<int> device = whole_index(entry.substr(0, dot));
    if (!device || *device >= devices) continue;
    if (dot == std::string_view::npos) {
      shown.insert(*device);
      continue;
    }
    // "D.S": a tile of card D, which only the composite hierarchy has.
    const std::optional<int> tile = whole_index(entry.substr(dot + 1));
    if (hierarchy == ZeHierarchy::kComposite && tile &&
        *tile < tiles[static_cast<std::size_t>(*device)]) {
      shown.insert(*device);
    }
  }
  return static_cast<int>(shown.size());
}

std::string list_entry(std::string_view list, int index) {
  const std::vector<std::string_view> entries = split_list(list);
  if (index < 0 || index >= static_cast<int>(entries.size())) return {};
  return std::string(entries[static_cast<std::size_t>(index)]);
}

}  // namespace ddprun::agent::devices
