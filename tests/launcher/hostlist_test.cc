// SLURM hostlist expansion: the forms SLURM writes, zero padding, products, every malformed
// input a clean error with its offset, and the limits checked before anything large is built.
#include "launcher/hostlist.h"

#include <gtest/gtest.h>

namespace ddprun::launcher {
namespace {

using Hosts = std::vector<std::string>;

Hosts expand(const std::string& text) {
  auto hosts = expand_hostlist(text);
  EXPECT_TRUE(hosts) << text << ": " << hosts.error_message();
  return hosts ? *hosts : Hosts{};
}

std::string error_of(const std::string& text, const HostlistLimits& limits = {}) {
  auto hosts = expand_hostlist(text, limits);
  EXPECT_FALSE(hosts) << text << " expanded to " << (hosts ? hosts->size() : 0) << " hosts";
  EXPECT_TRUE(hosts.status().is_invalid_argument());
  return hosts.error_message();
}

TEST(Hostlist, PlainNamesAndLists) {
  EXPECT_EQ(expand("login1"), Hosts{"login1"});
  EXPECT_EQ(expand("a,b.example.org,c-1_x"), (Hosts{"a", "b.example.org", "c-1_x"}));
  EXPECT_EQ(expand("n1,n1"), (Hosts{"n1", "n1"}));  // kept as SLURM wrote it
}

TEST(Hostlist, RangesWithZeroPadding) {
  EXPECT_EQ(expand("gpu[01-04,07],login1"),
            (Hosts{"gpu01", "gpu02", "gpu03", "gpu04", "gpu07", "login1"}));
  EXPECT_EQ(expand("n[8-11]"), (Hosts{"n8", "n9", "n10", "n11"}));           // no padding
  EXPECT_EQ(expand("n[008-010]"), (Hosts{"n008", "n009", "n010"}));          // lo's width
  EXPECT_EQ(expand("n[098-101]"), (Hosts{"n098", "n099", "n100", "n101"}));  // grows past it
  EXPECT_EQ(expand("n[0-2]"), (Hosts{"n0", "n1", "n2"}));                    // "0" is not padding
  EXPECT_EQ(expand("n[07]"), (Hosts{"n07"}));
  EXPECT_EQ(expand("[1-2]"), (Hosts{"1", "2"}));
}

TEST(Hostlist, SuffixesAndSeveralGroupsExpandToTheirProduct) {
  EXPECT_EQ(expand("rack[1-2]-ib"), (Hosts{"rack1-ib", "rack2-ib"}));
  EXPECT_EQ(expand("r[1-2]n[01-02]"), (Hosts{"r1n01", "r1n02", "r2n01", "r2n02"}));
  EXPECT_EQ(expand("127.0.0.[1-2]"), (Hosts{"127.0.0.1", "127.0.0.2"}));
  EXPECT_EQ(expand("a[1,3],b[2-3]c,d"), (Hosts{"a1", "a3", "b2c", "b3c", "d"}));
}

TEST(Hostlist, MalformedInputIsAnErrorWithItsOffset) {
  EXPECT_NE(error_of("").find("empty"), std::string::npos);
  EXPECT_NE(error_of("a,,b").find("empty host name at offset 2"), std::string::npos);
  EXPECT_NE(error_of(",a").find("offset 0"), std::string::npos);
  EXPECT_NE(error_of("a,").find("after ','"), std::string::npos);
  EXPECT_NE(error_of("n[1-2").find("'[' without ']' at offset 1"), std::string::npos);
  EXPECT_NE(error_of("n1-2]").find("']' without '['"), std::string::npos);
  EXPECT_NE(error_of("n[1-[2]]").find("expected a number"), std::string::npos);
  EXPECT_NE(error_of("n[1[2]]").find("nested '['"), std::string::npos);
  EXPECT_NE(error_of("n[]").find("expected a number"), std::string::npos);
  EXPECT_NE(error_of("n[a-b]").find("expected a number"), std::string::npos);
  EXPECT_NE(error_of("n[1-]").find("expected a number"), std::string::npos);
  EXPECT_NE(error_of("n[5-3]").find("range 5-3 goes down"), std::string::npos);
  EXPECT_NE(error_of("n[1;2]").find("unexpected ';'"), std::string::npos);
  EXPECT_NE(error_of("n[1,,2]").find("expected a number"), std::string::npos);
  EXPECT_NE(error_of("bad host").find("0x20"), std::string::npos);
  EXPECT_NE(error_of(std::string("n\0x", 3)).find("0x00"), std::string::npos);
  EXPECT_NE(error_of("n[1-2]\xff").find("0xff"), std::string::npos);
}

TEST(Hostlist, LimitsAreCheckedBeforeExpanding) {
  // A billion hosts from a dozen bytes: refused from the counts alone.
  EXPECT_NE(error_of("n[0-999999999]").find("more than 65536 hosts"), std::string::npos);
  EXPECT_NE(error_of("a[0-999]b[0-999]").find("more than 65536 hosts"), std::string::npos);
  EXPECT_NE(error_of("n[1234567890]").find("more than 9 digits"), std::string::npos);
  HostlistLimits small;
  small.max_hosts = 4;
  EXPECT_EQ(expand_hostlist("n[1-4]", small)->size(), 4u);
  EXPECT_NE(error_of("n[1-4],m", small).find("more than 4 hosts"), std::string::npos);
  EXPECT_NE(error_of("n[1-2],m[1-3]", small).find("more than 4 hosts"), std::string::npos);
  small.max_name = 5;
  EXPECT_EQ(expand_hostlist("ab[01-02]", small)->front(), "ab01");
  EXPECT_NE(error_of("abcd[10-11]", small).find("longer than 5 bytes"), std::string::npos);
  small.max_input = 8;
  EXPECT_NE(error_of("n[1-2],m[1]", small).find("more than the 8 allowed"), std::string::npos);
  // Exactly at the default limit is fine.
  EXPECT_EQ(expand_hostlist("n[1-65536]")->size(), 65536u);
}

}  // namespace
}  // namespace ddprun::launcher
