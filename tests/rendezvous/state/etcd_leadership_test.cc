// EtcdLeadership with real processes: three contenders (state_test_helper contend) against a
// real three-member etcd cluster. One leads and the others learn its address; killing the
// leader by PID hands the lead over after its lease expires; a resignation hands it over at
// once; losing one etcd member does not cost the leader its lead.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/rendezvous/state/etcd_cluster_test.h"

namespace ddprun::rdzv::state {
namespace {

using namespace std::chrono_literals;
using testing::Child;
using testing::EtcdCluster;

constexpr int kTtlMs = 2000;  // etcd's minimum lease TTL
constexpr int kPollMs = 200;

// One contender process and what it has said so far.
struct Contender {
  std::string address;
  std::unique_ptr<Child> child;
  std::vector<std::string> said;
  bool says(const std::string& prefix) const {
    return std::any_of(said.begin(), said.end(),
                       [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
  }
  int count(const std::string& prefix) const {
    return static_cast<int>(std::count_if(
        said.begin(), said.end(), [&](const std::string& l) { return l.rfind(prefix, 0) == 0; }));
  }
};

class EtcdLeadershipTest : public testing::EtcdClusterTest {
 protected:
  void SetUp() override {
    EtcdClusterTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    std::string endpoints;
    for (const auto& e : cluster_->endpoints()) endpoints += (endpoints.empty() ? "" : ",") + e;
    for (int i = 0; i < 3; ++i) {
      Contender c;
      c.address = fmt::format("replica-{}:29400", i);
      c.child = std::make_unique<Child>(
          std::vector<std::string>{STATE_TEST_HELPER, "contend", endpoints, "lead", c.address,
                                   std::to_string(kTtlMs), std::to_string(kPollMs)});
      contenders_.push_back(std::move(c));
    }
  }

  // Waits (bounded) until `done()`, collecting every contender's lines meanwhile.
  bool wait(const std::function<bool()>& done, Millis timeout = 20s) {
    std::vector<Child*> children;
    for (auto& c : contenders_) {
      if (c.child->pid() > 0) children.push_back(c.child.get());
    }
    return testing::wait_for_output(
        children,
        [&] {
          for (auto& c : contenders_) {
            for (auto& l : c.child->lines()) c.said.push_back(l);
            c.child->lines().clear();
          }
          return done();
        },
        timeout);
  }

  int leaders() const {
    return static_cast<int>(std::count_if(contenders_.begin(), contenders_.end(),
                                          [](const Contender& c) { return c.says("elected"); }));
  }
  Contender* leader() {
    for (auto& c : contenders_) {
      if (c.says("elected") && c.child->pid() > 0) return &c;
    }
    return nullptr;
  }
  std::string transcript() const {
    std::string out;
    for (const auto& c : contenders_) {
      out += c.address + ":";
      for (const auto& l : c.said) out += " [" + l + "]";
      out += "\n";
    }
    return out + cluster_->logs();
  }

  std::vector<Contender> contenders_;
};

TEST_F(EtcdLeadershipTest, OneLeadsAndTheOthersLearnItsAddress) {
  ASSERT_TRUE(wait([&] {
    Contender* l = leader();
    if (!l) return false;
    for (auto& c : contenders_) {
      if (&c != l && !c.says("leader " + l->address)) return false;
    }
    return true;
  })) << transcript();
  EXPECT_EQ(leaders(), 1) << transcript();
}

TEST_F(EtcdLeadershipTest, KillingTheLeaderHandsTheLeadToAnother) {
  ASSERT_TRUE(wait([&] { return leader() != nullptr; })) << transcript();
  Contender* first = leader();
  first->child->kill();  // no resignation: etcd must expire its lease
  ASSERT_TRUE(wait([&] {
    for (auto& c : contenders_) {
      if (&c != first && c.says("elected")) return true;
    }
    return false;
  })) << transcript();
  Contender* second = leader();
  ASSERT_NE(second, nullptr);
  // The remaining follower learns the new leader's address.
  ASSERT_TRUE(wait([&] {
    for (auto& c : contenders_) {
      if (&c != first && &c != second && !c.says("leader " + second->address)) return false;
    }
    return true;
  })) << transcript();
  EXPECT_EQ(leaders(), 2) << transcript();  // the dead one and its successor, one after another
}

TEST_F(EtcdLeadershipTest, AResignationHandsTheLeadOverAndItsHolderStops) {
  ASSERT_TRUE(wait([&] { return leader() != nullptr; })) << transcript();
  Contender* first = leader();
  first->child->close_stdin();
  ASSERT_TRUE(wait([&] { return first->says("resigned"); })) << transcript();
  EXPECT_EQ(first->child->wait_exit(10s), 0);
  ASSERT_TRUE(wait([&] { return leaders() == 2; })) << transcript();
}

TEST_F(EtcdLeadershipTest, TheLeaderKeepsLeadingWhenOneEtcdMemberDies) {
  ASSERT_TRUE(wait([&] { return leader() != nullptr; })) << transcript();
  Contender* first = leader();
  cluster_->kill_member(0);  // the member every contender tries first
  // Proof that the cluster still works and the lead was never lost: the leader resigns cleanly
  // (its revoke goes through the remaining members), and only then does another lead.
  first->child->close_stdin();
  ASSERT_TRUE(wait([&] { return first->says("resigned"); })) << transcript();
  EXPECT_FALSE(first->says("lost")) << transcript();
  ASSERT_TRUE(wait([&] { return leaders() == 2; })) << transcript();
}

}  // namespace
}  // namespace ddprun::rdzv::state
