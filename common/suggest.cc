#include "common/suggest.h"

#include <algorithm>
#include <numeric>

namespace ddprun {
namespace {

bool same_char(char a, char b) {
  auto norm = [](char c) { return c == '-' ? '_' : c; };
  return norm(a) == norm(b);
}

// Optimal string alignment distance (Damerau-Levenshtein without repeated edits of a span).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = same_char(a[i - 1], b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && same_char(a[i - 1], b[j - 2]) && same_char(a[i - 2], b[j - 1])) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

}  // namespace

std::optional<std::string> closest_match(std::string_view typed,
                                         const std::vector<std::string>& candidates,
                                         std::size_t max_distance) {
  std::optional<std::string> best;
  std::size_t best_distance = max_distance + 1;
  for (const auto& candidate : candidates) {
    // The distance is at least the difference in length: a long mistyped word (or garbage)
    // costs nothing more than a glance, not a quadratic table per candidate.
    const std::size_t longer = std::max(typed.size(), candidate.size());
    const std::size_t shorter = std::min(typed.size(), candidate.size());
    if (longer - shorter >= best_distance) continue;
    const std::size_t d = edit_distance(typed, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view typed, const std::vector<std::string>& candidates) {
  auto match = closest_match(typed, candidates);
  return match ? " (did you mean '" + *match + "'?)" : "";
}

}  // namespace ddprun
