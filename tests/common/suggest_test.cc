// "Did you mean": the closest name within two edits, '-' and '_' alike, and nothing for text
// that is nowhere near (however long it is).
#include "common/suggest.h"

#include <gtest/gtest.h>

namespace ddprun {
namespace {

const std::vector<std::string> kKeys = {"join_timeout", "last_call_timeout", "read_timeout",
                                        "is_host"};

TEST(SuggestTest, ANearMissNamesTheClosestKey) {
  EXPECT_EQ(closest_match("join_timout", kKeys), "join_timeout");             // a deletion
  EXPECT_EQ(closest_match("jion_timeout", kKeys), "join_timeout");            // a swap
  EXPECT_EQ(closest_match("last-call-timeout", kKeys), "last_call_timeout");  // '-' is '_'
  EXPECT_EQ(did_you_mean("is_hots", kKeys), " (did you mean 'is_host'?)");
}

TEST(SuggestTest, TextFarFromEveryKeyGetsNoSuggestion) {
  EXPECT_FALSE(closest_match("bananas", kKeys));
  EXPECT_EQ(did_you_mean("", kKeys), "");
  // A long key (garbage, or a value pasted as a key) is refused by its length alone.
  EXPECT_FALSE(closest_match(std::string(100'000, 'j'), kKeys));
  EXPECT_FALSE(closest_match(std::string("join_timeout") + std::string(3, 'x'), kKeys));
  EXPECT_EQ(closest_match(std::string("join_timeout") + std::string(2, 'x'), kKeys),
            "join_timeout");
}

}  // namespace
}  // namespace ddprun
