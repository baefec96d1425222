// EtcdStateStore against a real three-member etcd cluster (Debian's etcd-server) on loopback:
// saves read back by another client, forgets, order of one job's saves, a member killed by PID
// while saving, and the fence that stops a deposed leader from overwriting its successor.
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "rendezvous/state/etcd/etcd_client.h"
#include "rendezvous/state/etcd/etcd_state_store.h"
#include "tests/rendezvous/state/etcd_cluster_test.h"

namespace ddprun::rdzv::state {
namespace {

using namespace std::chrono_literals;
using testing::EtcdCluster;
using testing::run_until;

class EtcdStateStoreTest : public testing::EtcdClusterTest {
 protected:
  std::shared_ptr<EtcdClient> client(std::vector<std::string> endpoints) {
    return std::make_shared<EtcdClient>(
        io_, EtcdClientOptions{.endpoints = std::move(endpoints), .request_timeout = 1s});
  }

  // Saves and waits for the completion; the completion's status.
  Status save_and_wait(StateStore& store, const std::string& job,
                       std::optional<std::string> state) {
    std::optional<Status> result;
    store.save(job, std::move(state), [&](Status s) { result = std::move(s); });
    if (!run_until(
            io_, [&] { return result.has_value(); }, 20s)) {
      return Status::timed_out("save did not complete");
    }
    return *result;
  }

  Status save_host_and_wait(StateStore& store, const std::string& host,
                            std::optional<std::string> record) {
    std::optional<Status> result;
    store.save_excluded_host(host, std::move(record), [&](Status s) { result = std::move(s); });
    if (!run_until(
            io_, [&] { return result.has_value(); }, 20s)) {
      return Status::timed_out("save did not complete");
    }
    return *result;
  }

  boost::asio::io_context io_;
};

TEST_F(EtcdStateStoreTest, SavesAreReadBackByAnotherClientAndForgetsDelete) {
  EtcdStateStore store(client(cluster_->endpoints()), {.cluster = "t1"});
  ASSERT_TRUE(save_and_wait(store, "job-a", std::string("A\0bytes", 7)).ok());
  ASSERT_TRUE(save_and_wait(store, "job-b", "B1").ok());
  ASSERT_TRUE(save_and_wait(store, "job-c", "C").ok());
  ASSERT_TRUE(save_and_wait(store, "job-c", std::nullopt).ok());
  ASSERT_TRUE(save_and_wait(store, "job-never-saved", std::nullopt).ok());

  // Another client, preferring another member, in another cluster namespace and in this one.
  EtcdStateStore other(client({cluster_->endpoint(2), cluster_->endpoint(0)}), {.cluster = "t1"});
  auto all = other.load_all();
  ASSERT_TRUE(all.ok()) << all.error_message();
  EXPECT_EQ(
      testing::job_records(*all),
      (std::map<std::string, std::string>{{"job-a", std::string("A\0bytes", 7)}, {"job-b", "B1"}}));
  EtcdStateStore elsewhere(client(cluster_->endpoints()), {.cluster = "t2"});
  EXPECT_TRUE(elsewhere.load_all()->empty());
}

// A save carries the nodes that changed; etcd holds the whole job under one key
// (etcd_records.h), which another replica reads back node by node.
TEST_F(EtcdStateStoreTest, NodeRecordsChangeOneByOneAndAnotherReplicaReadsThemAll) {
  EtcdStateStore store(client(cluster_->endpoints()), {.cluster = "nodes"});
  std::vector<Status> results;
  auto done = [&](Status s) { results.push_back(s); };
  store.save("j", JobChange{"j1", {{"a", "a1"}, {"b", std::string("b\0\xff", 3)}}}, done);
  store.save("j", JobChange{"j2", {{"a", std::nullopt}, {"c", "c1"}}}, done);
  ASSERT_TRUE(run_until(
      io_, [&] { return results.size() == 2; }, 30s));
  for (const Status& s : results) EXPECT_TRUE(s.ok()) << s.message();
  EtcdStateStore other(client({cluster_->endpoint(1)}), {.cluster = "nodes"});
  auto all = other.load_all();
  ASSERT_TRUE(all.ok()) << all.error_message();
  EXPECT_EQ(*all, (std::map<std::string, StoredJob>{
                      {"j", {"j2", {{"b", std::string("b\0\xff", 3)}, {"c", "c1"}}}}}));
  // The replica that loaded it goes on changing it.
  results.clear();
  other.save("j", JobChange{"j3", {{"d", "d1"}}}, done);
  ASSERT_TRUE(run_until(
      io_, [&] { return results.size() == 1; }, 30s));
  EXPECT_EQ(store.load_all()->at("j").nodes.size(), 3u);
}

// A job is one etcd value: over max_state_bytes (--etcd-max-job-bytes) it is refused before
// it is sent, naming the sizes; a store given a larger limit writes it.
TEST_F(EtcdStateStoreTest, AJobOverItsLimitIsRefusedAndALargerLimitTakesIt) {
  JobChange big{"job", {}};
  for (int i = 0; i < 100; ++i) big.nodes["node-" + std::to_string(i)] = std::string(100, 'x');
  std::optional<Status> refused, taken;
  EtcdStateStore small(client(cluster_->endpoints()), {.cluster = "size", .max_state_bytes = 4096});
  small.save("j", big, [&](Status s) { refused = s; });
  EtcdStateStore large(client(cluster_->endpoints()),
                       {.cluster = "size", .max_state_bytes = 1u << 20});
  large.save("j", big, [&](Status s) { taken = s; });
  ASSERT_TRUE(run_until(
      io_, [&] { return refused && taken; }, 30s));
  EXPECT_TRUE(refused->is_refused());
  EXPECT_NE(refused->message().find("more than the 4096 bytes"), std::string::npos)
      << refused->message();
  EXPECT_TRUE(taken->ok()) << taken->message();
  EXPECT_EQ(large.load_all()->at("j").nodes.size(), 100u);
}

TEST_F(EtcdStateStoreTest, ManySavesOfOneJobCompleteInOrderAndTheLastWins) {
  EtcdStateStore store(client(cluster_->endpoints()), {.cluster = "order"});
  std::vector<int> completed;
  const int kSaves = 50;
  for (int i = 0; i < kSaves; ++i) {
    store.save("job", std::to_string(i), [&, i](Status s) {
      EXPECT_TRUE(s.ok()) << s.message();
      completed.push_back(i);
    });
  }
  EXPECT_TRUE(completed.empty()) << "a completion ran inside save()";
  ASSERT_TRUE(run_until(
      io_, [&] { return completed.size() == kSaves; }, 30s));
  for (int i = 0; i < kSaves; ++i) ASSERT_EQ(completed[i], i);
  EXPECT_EQ(store.load_all()->at("job").job, std::to_string(kSaves - 1));
}

TEST_F(EtcdStateStoreTest, SavesGoOnWhenTheMemberInUseIsKilled) {
  EtcdStateStore store(client(cluster_->endpoints()), {.cluster = "loss"});
  ASSERT_TRUE(save_and_wait(store, "job", "before").ok());
  cluster_->kill_member(0);  // the member the client prefers (it answered last)
  Status after = save_and_wait(store, "job", "after");
  ASSERT_TRUE(after.ok()) << after.message() << "\n" << cluster_->logs();
  EtcdStateStore reader(client({cluster_->endpoint(1), cluster_->endpoint(2)}),
                        {.cluster = "loss"});
  auto all = reader.load_all();
  ASSERT_TRUE(all.ok()) << all.error_message();
  EXPECT_EQ(all->at("job").job, "after");
}

TEST_F(EtcdStateStoreTest, AFencedStoreRefusesToWriteOnceAnotherLeaderKeyExists) {
  auto c = client(cluster_->endpoints());
  EtcdStateStore store(c, {.cluster = "fence"});
  // Become "leader" by creating the leader key, as EtcdLeadership does.
  std::optional<Result<etcd::PutResponse>> put;
  c->put({store.keys().leader(), "replica-1", 0}, [&](auto r) { put = std::move(r); });
  ASSERT_TRUE(run_until(
      io_, [&] { return put.has_value(); }, 10s));
  ASSERT_TRUE(put->ok()) << put->error_message();
  std::optional<Result<etcd::RangeResponse>> read;
  c->range({store.keys().leader(), {}, 0, 0}, [&](auto r) { read = std::move(r); });
  ASSERT_TRUE(run_until(
      io_, [&] { return read.has_value(); }, 10s));
  ASSERT_TRUE(read->ok() && (*read)->kvs.size() == 1);
  store.set_fence(LeaderFence{store.keys().leader(), (*read)->kvs[0].create_revision});
  ASSERT_TRUE(save_and_wait(store, "job", "mine").ok());

  // Another replica's term: the key deleted (lease expired) and created again.
  std::optional<Result<etcd::DeleteRangeResponse>> del;
  c->delete_range({store.keys().leader(), {}}, [&](auto r) { del = std::move(r); });
  ASSERT_TRUE(run_until(
      io_, [&] { return del.has_value(); }, 10s));
  put.reset();
  c->put({store.keys().leader(), "replica-2", 0}, [&](auto r) { put = std::move(r); });
  ASSERT_TRUE(run_until(
      io_, [&] { return put.has_value(); }, 10s));

  Status stale = save_and_wait(store, "job", "stale");
  EXPECT_TRUE(stale.is_refused()) << stale.message();
  EXPECT_NE(stale.message().find("no longer leads"), std::string::npos) << stale.message();
  EXPECT_EQ(store.load_all()->at("job").job, "mine");
}

// Issue 36: hosts kept out are one key each under /ddprun/<cluster>/excluded/, apart from the
// jobs, read back by another replica, removed on release, and fenced like jobs.
TEST_F(EtcdStateStoreTest, ExcludedHostsAreKeysOfTheirOwnAndFencedLikeJobs) {
  auto c = client(cluster_->endpoints());
  EtcdStateStore store(c, {.cluster = "ex"});
  ASSERT_TRUE(save_and_wait(store, "job", "j").ok());
  ASSERT_TRUE(save_host_and_wait(store, "127.0.0.3", std::string("r\0one", 5)).ok());
  ASSERT_TRUE(save_host_and_wait(store, "fd00::7", "r2").ok());
  ASSERT_TRUE(save_host_and_wait(store, "fd00::7", "r3").ok());
  ASSERT_TRUE(save_host_and_wait(store, "127.0.0.3", std::nullopt).ok());
  ASSERT_TRUE(save_host_and_wait(store, "never-kept-out", std::nullopt).ok());
  EtcdStateStore other(client({cluster_->endpoint(1)}), {.cluster = "ex"});
  auto hosts = other.load_excluded_hosts();
  ASSERT_TRUE(hosts.ok()) << hosts.error_message();
  EXPECT_EQ(*hosts, (std::map<std::string, std::string>{{"fd00::7", "r3"}}));
  EXPECT_EQ(other.load_all()->size(), 1u) << "hosts are not jobs";
  EXPECT_EQ(store.keys().excluded_host("h"), "/ddprun/ex/excluded/h");

  // Fenced on a leader key another replica has since re-created: refused.
  std::optional<Result<etcd::PutResponse>> put;
  c->put({store.keys().leader(), "replica-2", 0}, [&](auto r) { put = std::move(r); });
  ASSERT_TRUE(run_until(
      io_, [&] { return put.has_value(); }, 10s));
  ASSERT_TRUE(put->ok());
  store.set_fence(LeaderFence{store.keys().leader(), (*put)->revision + 1000});
  const Status stale = save_host_and_wait(store, "fd00::7", std::nullopt);
  EXPECT_TRUE(stale.is_refused()) << stale.message();
  EXPECT_EQ(other.load_excluded_hosts()->size(), 1u);
}

}  // namespace
}  // namespace ddprun::rdzv::state
