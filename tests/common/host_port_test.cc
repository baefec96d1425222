// The one host:port parser (common/host_port.h): every address a user or a peer gives.
#include "common/host_port.h"

#include <gtest/gtest.h>

namespace ddprun {
namespace {

HostPort parse_ok(std::string_view text, uint16_t default_port = 29400, HostPortRules rules = {}) {
  auto parsed = parse_host_port(text, default_port, rules);
  EXPECT_TRUE(parsed.ok()) << text << ": " << parsed.error_message();
  return parsed.ok() ? *parsed : HostPort{};
}

// The error's message, after checking that it is the user's-input kind and names the text.
std::string parse_error(std::string_view text, HostPortRules rules = {}) {
  auto parsed = parse_host_port(text, 29400, rules);
  EXPECT_FALSE(parsed.ok()) << text;
  if (parsed.ok()) return {};
  EXPECT_TRUE(parsed.status().is_invalid_argument()) << parsed.error_message();
  EXPECT_NE(parsed.error_message().find("'" + std::string(text) + "'"), std::string::npos)
      << parsed.error_message();
  return parsed.error_message();
}

TEST(HostPortTest, Ipv4) {
  EXPECT_EQ(parse_ok("10.1.2.3:29401"), (HostPort{"10.1.2.3", 29401}));
  EXPECT_EQ(parse_ok("127.0.0.1:1"), (HostPort{"127.0.0.1", 1}));
  EXPECT_EQ(parse_ok("127.0.0.1:65535"), (HostPort{"127.0.0.1", 65535}));
}

TEST(HostPortTest, Ipv6InBrackets) {
  EXPECT_EQ(parse_ok("[::1]:29400"), (HostPort{"::1", 29400}));
  EXPECT_EQ(parse_ok("[fe80::1%eth0]:7"), (HostPort{"fe80::1%eth0", 7}));
  EXPECT_EQ(parse_ok("[::1]", 2379), (HostPort{"::1", 2379}));
  // As torchrun reads it: the port follows the last ':'.
  EXPECT_EQ(parse_ok("::1:29401"), (HostPort{"::1", 29401}));
}

TEST(HostPortTest, HostNames) {
  EXPECT_EQ(parse_ok("head-node.example.com:29500"), (HostPort{"head-node.example.com", 29500}));
  EXPECT_EQ(parse_ok("localhost:2379"), (HostPort{"localhost", 2379}));
}

TEST(HostPortTest, DefaultPortWhenNoneIsGiven) {
  EXPECT_EQ(parse_ok("head"), (HostPort{"head", 29400}));
  EXPECT_EQ(parse_ok("head", 2379), (HostPort{"head", 2379}));
  EXPECT_NE(parse_error("head", {.port_optional = false}).find("no port"), std::string::npos);
}

TEST(HostPortTest, MissingOrEmptyPort) {
  EXPECT_NE(parse_error("head:").find("no port after ':'"), std::string::npos);
  EXPECT_NE(parse_error("[::1]:").find("no port after ':'"), std::string::npos);
}

TEST(HostPortTest, NonNumericPort) {
  EXPECT_NE(parse_error("head:12x").find("port '12x' is not a number"), std::string::npos);
  EXPECT_NE(parse_error("head:-1").find("is not a number"), std::string::npos);
  EXPECT_NE(parse_error("[::1]x").find("after ']'"), std::string::npos);
}

TEST(HostPortTest, OutOfRangePortSaysSo) {
  EXPECT_EQ(parse_error("h:70000"), "'h:70000': port 70000 is out of range (1-65535)");
  EXPECT_NE(parse_error("h:99999999999999999999").find("is out of range (1-65535)"),
            std::string::npos);
  EXPECT_NE(parse_error("h:0").find("port 0 is out of range (1-65535)"), std::string::npos);
  // Where 0 means "a free one" (ddprun --rdzv_endpoint), it is accepted.
  EXPECT_EQ(parse_ok("h:0", 29400, {.allow_port_zero = true}), (HostPort{"h", 0}));
  EXPECT_NE(parse_error("h:65536", {.allow_port_zero = true}).find("(0-65535)"), std::string::npos);
}

TEST(HostPortTest, MissingHost) {
  EXPECT_NE(parse_error(":5").find("no host"), std::string::npos);
  EXPECT_NE(parse_error("").find("no host"), std::string::npos);
  EXPECT_NE(parse_error("[]:5").find("no host"), std::string::npos);
  EXPECT_NE(parse_error("[::1").find("no ']'"), std::string::npos);
  EXPECT_NE(parse_error("::1").find("needs brackets"), std::string::npos);
}

TEST(HostPortTest, ToStringBracketsIpv6) {
  EXPECT_EQ(to_string(HostPort{"10.0.0.1", 29400}), "10.0.0.1:29400");
  EXPECT_EQ(to_string(HostPort{"::1", 7}), "[::1]:7");
  EXPECT_EQ(to_string(std::vector<HostPort>{{"a", 1}, {"::1", 2}}), "a:1,[::1]:2");
  for (const char* text : {"10.0.0.1:29400", "[::1]:7", "h:1"}) {
    EXPECT_EQ(to_string(parse_ok(text)), text);
  }
}

TEST(HostPortTest, Lists) {
  auto three = parse_host_port_list("h1:29401,h2,[::1]:29403", 29400);
  ASSERT_TRUE(three.ok()) << three.error_message();
  EXPECT_EQ(*three, (std::vector<HostPort>{{"h1", 29401}, {"h2", 29400}, {"::1", 29403}}));
  auto empty = parse_host_port_list("h1,,h2", 29400);
  ASSERT_FALSE(empty.ok());
  EXPECT_TRUE(empty.status().is_invalid_argument());
  EXPECT_NE(empty.error_message().find("'h1,,h2': an empty address"), std::string::npos);
  auto bad = parse_host_port_list("h1,h2:70000", 29400);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error_message().find("port 70000 is out of range"), std::string::npos);
}

}  // namespace
}  // namespace ddprun
