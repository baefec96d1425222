// The etcd gateway's JSON, on answers captured from Debian's etcd 3.4.23.
#include <gtest/gtest.h>

#include "rendezvous/state/etcd/etcd_json.h"

namespace ddprun::rdzv::state::etcd {
namespace {

using nlohmann::json;

TEST(EtcdJsonTest, Base64RoundTripsBinaryAndRefusesGarbage) {
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  for (size_t n : {0u, 1u, 2u, 3u, 4u, 255u, 256u}) {
    const std::string in = all.substr(0, n);
    auto out = base64_decode(base64_encode(in));
    ASSERT_TRUE(out.ok()) << n;
    EXPECT_EQ(*out, in);
  }
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(*base64_decode("YmFy"), "bar");
  EXPECT_TRUE(base64_decode("Zm9").status().is_malformed());
  EXPECT_TRUE(base64_decode("Zm!v").status().is_malformed());
  EXPECT_TRUE(base64_decode("Zm9v\n===").status().is_malformed());
}

TEST(EtcdJsonTest, PrefixRangeEndFollowsEtcdsConvention) {
  EXPECT_EQ(prefix_range_end("/ddprun/c/jobs/"), "/ddprun/c/jobs0");
  EXPECT_EQ(prefix_range_end("a\xff"), "b");
  EXPECT_EQ(prefix_range_end("\xff\xff"), std::string(1, '\0'));
}

TEST(EtcdJsonTest, RequestsUseStringsForIntegersAndBase64ForBytes) {
  json put = to_json(PutRequest{"k", "v", 7});
  EXPECT_EQ(put, json::parse(R"({"key":"aw==","value":"dg==","lease":"7"})"));
  TxnRequest txn;
  txn.compare.push_back({"k", Compare::Target::kCreateRevision, 0, {}});
  txn.success.push_back(PutRequest{"k", "v", 0});
  txn.failure.push_back(RangeRequest{"k", {}, 0, 0});
  EXPECT_EQ(to_json(txn), json::parse(R"({
    "compare":[{"key":"aw==","target":"CREATE","result":"EQUAL","create_revision":"0"}],
    "success":[{"request_put":{"key":"aw==","value":"dg=="}}],
    "failure":[{"request_range":{"key":"aw=="}}]})"));
  EXPECT_EQ(to_json(RangeRequest{"a", "b", 10, 5}),
            json::parse(R"({"key":"YQ==","range_end":"Yg==","limit":"10","revision":"5"})"));
}

TEST(EtcdJsonTest, ParsesCapturedAnswers) {
  auto range = parse_range(json::parse(
      R"({"header":{"cluster_id":"15118495548433857066","member_id":"13668033151171901709",
      "revision":"2","raft_term":"2"},"kvs":[{"key":"Zm9v","create_revision":"2",
      "mod_revision":"2","version":"1","value":"YmFy","lease":"4111120201759445768"}],
      "count":"1"})"));
  ASSERT_TRUE(range.ok()) << range.error_message();
  EXPECT_EQ(range->revision, 2);
  ASSERT_EQ(range->kvs.size(), 1u);
  EXPECT_EQ(range->kvs[0].key, "foo");
  EXPECT_EQ(range->kvs[0].value, "bar");
  EXPECT_EQ(range->kvs[0].lease, 4111120201759445768);
  EXPECT_FALSE(range->more);

  // A failed compare leaves "succeeded" out (proto3 default) and runs the failure branch.
  auto txn = parse_txn(json::parse(
      R"({"header":{"revision":"2"},"responses":[{"response_range":{"header":{"revision":"2"},
      "kvs":[{"key":"Zm9v","create_revision":"2","mod_revision":"2","version":"1",
      "value":"YmFy"}],"count":"1"}}]})"));
  ASSERT_TRUE(txn.ok()) << txn.error_message();
  EXPECT_FALSE(txn->succeeded);
  ASSERT_EQ(txn->responses.size(), 1u);
  EXPECT_EQ(std::get<RangeResponse>(txn->responses[0]).kvs.at(0).create_revision, 2);

  auto grant = parse_lease_grant(
      json::parse(R"({"header":{"revision":"1"},"ID":"4111120201759445766","TTL":"2"})"));
  ASSERT_TRUE(grant.ok());
  EXPECT_EQ(grant->id, 4111120201759445766);
  EXPECT_EQ(grant->ttl_seconds, 2);

  // A keep-alive of a lease that is gone answers 200 without a TTL.
  EXPECT_EQ(*parse_lease_keepalive(json::parse(R"({"result":{"header":{},"ID":"12345"}})")), 0);
  EXPECT_EQ(*parse_lease_keepalive(json::parse(R"({"result":{"ID":"1","TTL":"5"}})")), 5);
  EXPECT_EQ(parse_range(json::parse(R"({"header":{"revision":"3"}})"))->kvs.size(), 0u);
}

TEST(EtcdJsonTest, MalformedAnswersAreCleanErrors) {
  EXPECT_TRUE(parse_range(json::parse("[1]")).status().is_malformed());
  EXPECT_TRUE(parse_range(json::parse(R"({"header":{"revision":"x"}})")).status().is_malformed());
  EXPECT_TRUE(
      parse_range(json::parse(R"({"kvs":[{"key":"not base64!"}]})")).status().is_malformed());
  EXPECT_TRUE(
      parse_txn(json::parse(R"({"responses":[{"response_what":{}}]})")).status().is_malformed());
  EXPECT_TRUE(parse_lease_grant(json::parse(R"({"TTL":"5"})")).status().is_malformed());
}

TEST(EtcdJsonTest, ErrorsKeepEtcdsWordsAndAKindByGrpcCode) {
  Status gone = parse_error(404, R"({"error":"etcdserver: requested lease not found",
      "message":"etcdserver: requested lease not found","code":5})");
  EXPECT_TRUE(gone.is_not_found());
  EXPECT_EQ(gone.message(), "etcdserver: requested lease not found");
  EXPECT_TRUE(
      parse_error(503, R"({"message":"etcdserver: no leader","code":14})").is_unavailable());
  Status html = parse_error(502, "<html>bad gateway</html>");
  EXPECT_TRUE(html.is_unavailable());
  EXPECT_NE(html.message().find("HTTP 502"), std::string::npos);
  EXPECT_FALSE(parse_error(400, "{}").is_unavailable());
}

}  // namespace
}  // namespace ddprun::rdzv::state::etcd
