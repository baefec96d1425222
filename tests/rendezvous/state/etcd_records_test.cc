// The value the etcd state store writes for one job (etcd_records.h): the job's record and its
// node records, binary safe; what an older daemon wrote (a whole job record) still reads; a
// damaged value is refused saying where.
#include "rendezvous/state/etcd/etcd_records.h"

#include <gtest/gtest.h>

namespace ddprun::rdzv::state {
namespace {

TEST(EtcdRecordsTest, AJobAndItsNodesRoundTripBinarySafe) {
  const StoredJob job{std::string("j\0b", 3), {{"a", "{}"}, {"b:1", std::string("\xff\0:", 3)}}};
  auto back = decode_job_records(encode_job_records(job));
  ASSERT_TRUE(back.ok()) << back.error_message();
  EXPECT_EQ(*back, job);
  auto empty = decode_job_records(encode_job_records(StoredJob{}));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, StoredJob{});
}

TEST(EtcdRecordsTest, AValueFromAnOlderDaemonIsAJobRecordWithoutNodeRecords) {
  auto old = decode_job_records(R"({"v":2,"round":{}})");
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->job, R"({"v":2,"round":{}})");
  EXPECT_TRUE(old->nodes.empty());
}

TEST(EtcdRecordsTest, DamagedValuesAreRefusedSayingWhere) {
  const std::string good = encode_job_records({"job", {{"a", "1"}, {"b", "2"}}});
  for (size_t cut = std::string("ddprun-records/1\n").size(); cut < good.size(); ++cut) {
    auto r = decode_job_records(good.substr(0, cut));
    ASSERT_FALSE(r.ok()) << "cut at " << cut;
    EXPECT_NE(r.error_message().find("unreadable at byte"), std::string::npos) << r.error_message();
  }
  auto extra = decode_job_records(good + "x");
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(extra.error_message().find("after the last node"), std::string::npos);
  auto huge = decode_job_records("ddprun-records/1\n99999999999999999999:x");
  ASSERT_FALSE(huge.ok());
  auto twice = decode_job_records("ddprun-records/1\n1:j2:1:a1:11:a1:2");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error_message().find("stored twice"), std::string::npos) << twice.error_message();
}

}  // namespace
}  // namespace ddprun::rdzv::state
