// How nodes are named to people (rendezvous/wire/node_name.h).
#include "rendezvous/wire/node_name.h"

#include <gtest/gtest.h>

namespace ddprun::rdzv {
namespace {

TEST(NodeName, AnAgentsIdIsNamedByItsHostAndPidWithoutTheRandomPart) {
  EXPECT_EQ(node_display_name("gpu-07:41234:2718281828"), "gpu-07:41234");
  EXPECT_EQ(node_display_name("127.0.0.2:77:1"), "127.0.0.2:77");
}

TEST(NodeName, AnyOtherIdIsItsOwnName) {
  for (const char* id : {"node-a", "job-s-node-1", "a:b:c", "host:12", ":12:34", "host::34",
                         "host:12:", "host:x1:34", ""}) {
    EXPECT_EQ(node_display_name(id), id) << id;
  }
}

TEST(NodeName, AnAgentsHostIsItsIdWithoutPidAndRandomPart) {
  EXPECT_EQ(node_host("gpu-07:41234:2718281828"), "gpu-07");
  EXPECT_EQ(node_host("127.0.0.3:77:1"), "127.0.0.3");
  // An IPv6 --local_addr keeps its colons: only the last two components are the agent's.
  EXPECT_EQ(node_host("fd00::7:41234:99"), "fd00::7");
  EXPECT_EQ(node_host("::1:5:6"), "::1");
}

TEST(NodeName, AnyOtherIdIsItsOwnHost) {
  for (const char* id : {"node-a", "a:b:c", "host:12", ":12:34", "host::34", "host:x1:34", ""}) {
    EXPECT_EQ(node_host(id), id) << id;
  }
}

}  // namespace
}  // namespace ddprun::rdzv
