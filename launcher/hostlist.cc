#include "launcher/hostlist.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <variant>

#include <fmt/format.h>

namespace ddprun::launcher {
namespace {

constexpr std::size_t kMaxDigits = 9;  // numbers below 10^9: no overflow anywhere below

// One "lo-hi" (or "n") of a bracket group; `width` pads with zeros (0: no padding).
struct Range {
  uint32_t lo = 0;
  uint32_t hi = 0;
  std::size_t width = 0;
  std::size_t count() const { return std::size_t{hi} - lo + 1; }
};
using Group = std::vector<Range>;
// An item is a sequence of literal text and bracket groups.
using Segment = std::variant<std::string, Group>;

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

Status bad(std::size_t at, const std::string& what) {
  return Status::invalid_argument(fmt::format("hostlist: {} at offset {}", what, at));
}

// Digits of `text` from `pos` (advanced past them) as a number; an error if there are none or
// too many.
Result<uint32_t> read_number(std::string_view text, std::size_t& pos, std::size_t& digits) {
  const std::size_t start = pos;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
  digits = pos - start;
  if (digits == 0) return bad(start, "expected a number in brackets");
  if (digits > kMaxDigits) {
    return bad(start, fmt::format("a number of more than {} digits", kMaxDigits));
  }
  uint32_t value = 0;
  for (std::size_t i = start; i < pos; ++i) value = value * 10 + (text[i] - '0');
  return value;
}

// The group whose '[' is at `pos`; on return `pos` is past its ']'.
Result<Group> read_group(std::string_view text, std::size_t& pos) {
  const std::size_t open = pos++;
  Group group;
  for (;;) {
    Range r;
    std::size_t digits = 0;
    const std::size_t lo_at = pos;
    auto lo = read_number(text, pos, digits);
    if (!lo) return lo.status();
    r.lo = r.hi = *lo;
    if (digits > 1 && text[lo_at] == '0') r.width = digits;  // "01-04": two digits each
    if (pos < text.size() && text[pos] == '-') {
      ++pos;
      std::size_t hi_digits = 0;
      auto hi = read_number(text, pos, hi_digits);
      if (!hi) return hi.status();
      if (*hi < r.lo) return bad(lo_at, fmt::format("range {}-{} goes down", r.lo, *hi));
      r.hi = *hi;
    }
    group.push_back(r);
    if (pos >= text.size()) return bad(open, "'[' without ']'");
    if (text[pos] == ']') {
      ++pos;
      return group;
    }
    if (text[pos] == '[') return bad(pos, "nested '['");
    if (text[pos] != ',') return bad(pos, fmt::format("unexpected '{}' in brackets", text[pos]));
    ++pos;
  }
}

// One item (up to a top-level comma or the end); `pos` ends on the comma or at the end.
Result<std::vector<Segment>> read_item(std::string_view text, std::size_t& pos) {
  std::vector<Segment> segments;
  const std::size_t start = pos;
  while (pos < text.size() && text[pos] != ',') {
    const char c = text[pos];
    if (c == '[') {
      auto group = read_group(text, pos);
      if (!group) return group.status();
      segments.emplace_back(std::move(group.value()));
    } else if (c == ']') {
      return bad(pos, "']' without '['");
    } else if (is_name_char(c)) {
      if (segments.empty() || !std::holds_alternative<std::string>(segments.back())) {
        segments.emplace_back(std::string());
      }
      std::get<std::string>(segments.back()) += c;
      ++pos;
    } else {
      return bad(pos, fmt::format("character 0x{:02x} cannot be in a host name",
                                  static_cast<unsigned char>(c)));
    }
  }
  if (pos == start) return bad(start, "empty host name");
  return segments;
}

std::size_t group_size(const Group& g) {
  std::size_t n = 0;
  for (const Range& r : g) n += r.count();  // each count < 10^9, at most 32K ranges: no wrap
  return n;
}

// How many names `segments` expands to, and the longest; checked against the limits left.
Status check_item(const std::vector<Segment>& segments, std::size_t at, std::size_t hosts_left,
                  const HostlistLimits& limits, std::size_t& count) {
  count = 1;
  std::size_t longest = 0;
  for (const Segment& s : segments) {
    if (const auto* literal = std::get_if<std::string>(&s)) {
      longest += literal->size();
      continue;
    }
    const Group& g = std::get<Group>(s);
    const std::size_t n = group_size(g);
    if (n > hosts_left / count) {  // count * n > hosts_left, without overflow
      return bad(at, fmt::format("more than {} hosts", limits.max_hosts));
    }
    count *= n;
    std::size_t widest = 0;
    for (const Range& r : g) {
      widest = std::max<std::size_t>({widest, r.width, fmt::formatted_size("{}", r.hi)});
    }
    longest += widest;
  }
  if (count > hosts_left) return bad(at, fmt::format("more than {} hosts", limits.max_hosts));
  if (longest > limits.max_name) {
    return bad(at, fmt::format("a host name longer than {} bytes", limits.max_name));
  }
  return {};
}

// Appends every name of `segments` (leftmost group slowest) to `out`.
void expand_item(const std::vector<Segment>& segments, std::size_t index, std::string& name,
                 std::vector<std::string>& out) {
  if (index == segments.size()) {
    out.push_back(name);
    return;
  }
  const std::size_t keep = name.size();
  if (const auto* literal = std::get_if<std::string>(&segments[index])) {
    name += *literal;
    expand_item(segments, index + 1, name, out);
  } else {
    for (const Range& r : std::get<Group>(segments[index])) {
      for (uint32_t n = r.lo;; ++n) {
        name += fmt::format("{:0{}}", n, r.width);
        expand_item(segments, index + 1, name, out);
        name.resize(keep);
        if (n == r.hi) break;
      }
    }
  }
  name.resize(keep);
}

}  // namespace

Result<std::vector<std::string>> expand_hostlist(std::string_view text,
                                                 const HostlistLimits& limits) {
  if (text.size() > limits.max_input) {
    return Status::invalid_argument(
        fmt::format("hostlist: {} bytes, more than the {} allowed", text.size(), limits.max_input));
  }
  if (text.empty()) return Status::invalid_argument("hostlist: empty");
  std::vector<std::string> hosts;
  std::size_t pos = 0;
  for (;;) {
    const std::size_t at = pos;
    auto item = read_item(text, pos);
    if (!item) return item.status();
    std::size_t count = 0;
    if (Status s = check_item(*item, at, limits.max_hosts - hosts.size(), limits, count); !s) {
      return s;
    }
    hosts.reserve(hosts.size() + count);
    std::string name;
    expand_item(*item, 0, name, hosts);
    if (pos == text.size()) return hosts;
    ++pos;  // the comma
    if (pos == text.size()) return bad(pos, "empty host name after ','");
  }
}

}  // namespace ddprun::launcher
