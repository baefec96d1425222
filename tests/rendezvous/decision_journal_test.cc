// The decision journal's group commit (rendezvous/server/decision_journal.h): a job has one save in
// flight; decisions made meanwhile share the next save, whose state is read when it starts;
// nothing is delivered before a save that covers it is durable; a failed save delivers nothing
// more.
#include "rendezvous/server/decision_journal.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <optional>
#include <string>
#include <vector>

#include "rendezvous/state/memory_state_store.h"

namespace ddprun::rdzv {
namespace {

class DecisionJournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    journal_.attach(&store_, [this](const Status& why) { failures_.push_back(why.message()); });
  }
  DecisionJournal::StateSource source() {
    return [this]() { return state::JobChange{state_, {}}; };
  }
  std::function<void()> deliver(const std::string& what) {
    return [this, what] { delivered_.push_back(what + "@" + store_.contents().at("j").job); };
  }
  // Runs the loop until nothing is left to do (the store's completions are posted).
  void settle() {
    io_.restart();
    io_.run();
  }

  boost::asio::io_context io_;
  state::MemoryStateStore store_{io_};
  DecisionJournal journal_;
  std::optional<std::string> state_ = "v1";
  std::vector<std::string> delivered_;  // "decision@state on the medium when it was delivered"
  std::vector<std::string> failures_;
};

TEST_F(DecisionJournalTest, DecisionsMadeWhileASaveIsInFlightShareTheNextSave) {
  journal_.record("j", source(), deliver("a"));
  EXPECT_EQ(store_.save_count(), 1u);  // the first decision is saved at once
  state_ = "v2";
  journal_.record("j", source(), deliver("b"));
  state_ = "v3";
  journal_.record("j", source(), deliver("c"));
  EXPECT_EQ(store_.save_count(), 1u);  // b and c wait for a's save
  EXPECT_TRUE(delivered_.empty());     // a's completion has not run yet
  settle();
  // a after its own save; b and c together after one save of the state as it was then (v3).
  EXPECT_EQ(delivered_, (std::vector<std::string>{"a@v1", "b@v3", "c@v3"}));
  EXPECT_EQ(store_.save_count(), 2u);
  EXPECT_EQ(journal_.saves(), 2u);
  EXPECT_TRUE(failures_.empty());
}

TEST_F(DecisionJournalTest, ADecisionMadeWhileDeliveringWaitsForASaveOfItsOwn) {
  journal_.record("j", source(), [this] {
    delivered_.push_back("a");
    state_ = "v2";
    journal_.record("j", source(), deliver("b"));
  });
  settle();
  EXPECT_EQ(delivered_, (std::vector<std::string>{"a", "b@v2"}));
  EXPECT_EQ(store_.save_count(), 2u);
}

TEST_F(DecisionJournalTest, JobsAreSavedIndependently) {
  journal_.record("j", source(), deliver("a"));
  journal_.record("k", [] { return state::JobChange{"k1", {}}; }, {});
  EXPECT_EQ(store_.save_count(), 2u);  // k does not wait for j
  settle();
  EXPECT_EQ(store_.contents().at("k").job, "k1");
  EXPECT_EQ(delivered_, (std::vector<std::string>{"a@v1"}));
}

TEST_F(DecisionJournalTest, ASourceWithNoStateForgetsTheJob) {
  journal_.record("j", source(), deliver("a"));
  settle();
  state_.reset();
  journal_.record("j", source(), {});
  settle();
  EXPECT_FALSE(store_.contents().count("j"));
}

TEST_F(DecisionJournalTest, AFailedSaveDeliversNothingMoreAndSaysSoOnce) {
  journal_.record("j", source(), deliver("a"));
  settle();
  store_.fail_with(Status::error("disk full"));
  journal_.record("j", source(), deliver("b"));
  journal_.record("j", source(), deliver("c"));  // waits behind b's failing save
  settle();
  store_.fail_with(Status{});
  journal_.record("j", source(), deliver("d"));  // the journal has stopped for good
  settle();
  EXPECT_EQ(delivered_, (std::vector<std::string>{"a@v1"}));
  ASSERT_EQ(failures_.size(), 1u);
  EXPECT_NE(failures_[0].find("disk full"), std::string::npos);
}

TEST_F(DecisionJournalTest, WithoutAStoreDeliveriesRunAtOnce) {
  DecisionJournal plain;
  bool ran = false;
  plain.record("j", source(), [&] { ran = true; });
  EXPECT_TRUE(ran);
  EXPECT_EQ(plain.saves(), 0u);
}

}  // namespace
}  // namespace ddprun::rdzv
