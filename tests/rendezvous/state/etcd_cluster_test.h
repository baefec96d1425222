// The fixture of the tests against a real etcd: a three-member cluster on loopback, started in
// SetUp (the test is skipped, saying why, when there is no etcd binary) and ended with the test.
#pragma once

#include <filesystem>
#include <memory>

#include <gtest/gtest.h>

#include "tests/rendezvous/state/state_test_util.h"

namespace ddprun::rdzv::state::testing {

class EtcdClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(etcd_binary())) {
      GTEST_SKIP() << "no etcd binary at " << etcd_binary()
                   << " (install Debian's etcd-server, or set DDPRUN_ETCD)";
    }
    cluster_ = std::make_unique<EtcdCluster>(3);
    ASSERT_TRUE(cluster_->start()) << "etcd did not start:\n" << cluster_->logs();
  }

  std::unique_ptr<EtcdCluster> cluster_;
};

}  // namespace ddprun::rdzv::state::testing
