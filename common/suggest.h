// "Did you mean ...?" for names a user typed: flags, config keys, --rdzv_conf keys.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun {

// The candidate closest to `typed` by edit distance (insertions, deletions, substitutions and
// swaps of neighbours each cost 1), when it is within `max_distance`; the first such candidate
// on a tie. Case-sensitive; '-' and '_' count as equal, as in torchrun's flag spellings.
std::optional<std::string> closest_match(std::string_view typed,
                                         const std::vector<std::string>& candidates,
                                         std::size_t max_distance = 2);

// " (did you mean 'x'?)" or "" : ready to append to an error message.
std::string did_you_mean(std::string_view typed, const std::vector<std::string>& candidates);

}  // namespace ddprun
