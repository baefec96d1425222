// The wire codec on byte strings: round trips of every message, and every malformed input a
// clean error (truncation at every byte, oversized lengths, unknown types, trailing bytes).
#include "rendezvous/wire/codec.h"
#include "rendezvous/wire/payload_codec.h"

#include <random>

#include <gtest/gtest.h>

namespace ddprun::rdzv {
namespace {

std::vector<ClientMessage> sample_client_messages() {
  JoinMsg join{7, NodeInfo{"node-a", 4, 2, "10.0.0.1", 29500},
               JobOptions{2, 4, 3, Millis(600000), Millis(30000), Millis(15000), Millis(300000)}};
  JoinMsg no_hint = join;
  no_hint.node.node_rank_hint.reset();
  return {Hello{kProtocolMagic, kProtocolVersion, "job-1"},
          join,
          no_hint,
          ResumeMsg{3, "node-a", 99, 5},
          HeartbeatMsg{12},
          ReportFailureMsg{4, 2, "{\"json\":1}", -9},
          ReportSuccessMsg{5, 2},
          LeaveMsg{6, {}},
          LeaveMsg{7, "rank 3 asked to exclude this node: ECC errors on GPU 3"},
          ProgressMsg{
              7,
              3,
              1500,
              {{0, 0, 12, 250, true, 2, "step at train.py:40", 153'000}, {1, 1, -1, 900, false}}},
          ProgressMsg{9, 3, 0, {}},
          ProgressQueryMsg{8},
          StatusQuery{},
          StatusQuery{kProtocolMagic, kProtocolVersion, std::string(32, 'n')},
          StatusQuery{kProtocolMagic, kProtocolVersion, {}, "127.0.0.3"},
          AuthProofMsg{std::string(32, 'p')}};
}

StatusReport sample_status_report() {
  StatusReport report;
  JobStatus j{"job-1", JobPhase::kRunning, 3, 1, 2, 1, 4, 2, {}, {}};
  j.stragglers = {1500, 3, 200'000, {{2, 1, "10.0.0.2", 420'000}}};
  j.nodes.push_back({"node-a", "127.0.0.1:40000", NodePhase::kMember, 0, 2, 120});
  j.nodes.push_back({"node-b", "", NodePhase::kIdle, -1, 1, -1});
  report.jobs.push_back(j);
  report.jobs.push_back({"job-2", JobPhase::kNoRound, 0, 0, 0, 0, 0, 1, {}, {}});
  report.excluded_hosts.push_back({"fd00::7", "its workers caused 3 of the job's failures", "job-1",
                                   "fd00::7:41234", 1'790'000'000'000, 1'790'003'600'000});
  return report;
}

std::vector<ServerMessage> sample_server_messages() {
  Reply reply{11, false, "bad", -42, std::string("\x00\x01payload", 9)};
  RoundAssigned a{"job", 3, 1, 2, 4, 4, 8, "10.0.0.1", 29500, 1, 3};
  return {HelloAck{},
          reply,
          a,
          RestartRequested{2, RestartReason::kWorkerFailure, "node b failed", "report"},
          JobFailed{JobFailureReason::kRestartsExhausted, "no restarts", "report", 3},
          JobSucceeded{5},
          HeartbeatAck{},
          ErrorMsg{"shutting down"},
          sample_status_report(),
          AuthChallenge{std::string(32, 's'), std::string(32, 'q')},
          Redirect{"10.0.0.2", 29400},
          Redirect{}};
}

TEST(CodecTest, ClientMessagesRoundTrip) {
  CodecLimits limits;
  for (const auto& m : sample_client_messages()) {
    const std::string frame = encode_frame(m);
    auto decoded = decode_client_frame(frame, limits);
    ASSERT_TRUE(decoded.ok()) << message_name(m) << ": " << decoded.error_message();
    EXPECT_EQ(encode_frame(*decoded), frame) << message_name(m);
  }
}

TEST(CodecTest, ServerMessagesRoundTrip) {
  CodecLimits limits;
  for (const auto& m : sample_server_messages()) {
    const std::string frame = encode_frame(m);
    auto decoded = decode_server_frame(frame, limits);
    ASSERT_TRUE(decoded.ok()) << decoded.error_message();
    EXPECT_EQ(encode_frame(*decoded), frame);
  }
  auto a = decode_server_frame(encode_frame(sample_server_messages()[2]), limits);
  const auto& round = std::get<RoundAssigned>(*a);
  EXPECT_EQ(round.master_addr, "10.0.0.1");
  EXPECT_EQ(round.world_size, 8u);
}

TEST(CodecTest, RedirectNeedsAHostAndAPortOrNeither) {
  CodecLimits limits;
  auto leader = decode_server_frame(encode_frame(ServerMessage(Redirect{"h2", 29401})), limits);
  ASSERT_TRUE(leader.ok()) << leader.error_message();
  EXPECT_EQ(std::get<Redirect>(*leader).host, "h2");
  EXPECT_EQ(std::get<Redirect>(*leader).port, 29401);
  EXPECT_FALSE(decode_server_frame(encode_frame(ServerMessage(Redirect{"h2", 0})), limits).ok());
  EXPECT_FALSE(decode_server_frame(encode_frame(ServerMessage(Redirect{"", 29400})), limits).ok());
  auto long_host = decode_server_frame(
      encode_frame(ServerMessage(Redirect{std::string(300, 'h'), 29400})), limits);
  ASSERT_FALSE(long_host.ok());
  EXPECT_TRUE(long_host.status().is_malformed());
}

TEST(CodecTest, EveryTruncationIsAnError) {
  CodecLimits limits;
  for (const auto& m : sample_client_messages()) {
    const std::string frame = encode_frame(m);
    for (size_t cut = 0; cut < frame.size(); ++cut) {
      EXPECT_FALSE(decode_client_frame(frame.substr(0, cut), limits).ok()) << cut;
      // A consistent header around a truncated body: the body decoder must refuse it too.
      if (cut > kFrameHeaderBytes) {
        auto body = std::span<const uint8_t>(
            reinterpret_cast<const uint8_t*>(frame.data()) + kFrameHeaderBytes,
            cut - kFrameHeaderBytes);
        EXPECT_FALSE(decode_client_message(body, limits).ok()) << message_name(m) << " " << cut;
      }
    }
  }
  for (const auto& m : sample_server_messages()) {
    const std::string frame = encode_frame(m);
    for (size_t cut = 0; cut < frame.size(); ++cut) {
      EXPECT_FALSE(decode_server_frame(frame.substr(0, cut), limits).ok());
    }
  }
}

TEST(CodecTest, OversizedAndEmptyLengthsAreRejectedBeforeReadingTheBody) {
  CodecLimits limits;
  limits.max_frame_bytes = 1024;
  const uint8_t huge[4] = {0x7f, 0xff, 0xff, 0xff};
  auto len = decode_frame_length(std::span<const uint8_t, 4>(huge, 4), limits);
  ASSERT_FALSE(len.ok());
  EXPECT_NE(len.error_message().find("exceeds the limit"), std::string::npos);
  const uint8_t zero[4] = {0, 0, 0, 0};
  EXPECT_FALSE(decode_frame_length(std::span<const uint8_t, 4>(zero, 4), limits).ok());
  // An HTTP request reads as a gigantic length: refused, not allocated.
  const std::string http = "GET / HTTP/1.1\r\n";
  EXPECT_FALSE(decode_client_frame(http, limits).ok());
}

TEST(CodecTest, StringLongerThanLimitOrFrameIsRejected) {
  CodecLimits limits;
  limits.max_string_bytes = 8;
  EXPECT_FALSE(
      decode_client_frame(
          encode_frame(ClientMessage(Hello{kProtocolMagic, 1, "a-very-long-job-id"})), limits)
          .ok());
  // A string length field claiming more bytes than the frame holds.
  std::string frame = encode_frame(ClientMessage(Hello{kProtocolMagic, 1, "job"}));
  frame[kFrameHeaderBytes + 1 + 4 + 2 + 3] = 0x7f;  // low byte of the job id length
  EXPECT_FALSE(decode_client_frame(frame, CodecLimits{}).ok());
}

TEST(CodecTest, JoinValuesTravelWhole) {
  JoinMsg join{7, NodeInfo{"node-a", 4, 2, "10.0.0.1", 29500},
               JobOptions{2, 4, 3, Millis(600000), Millis(30000), Millis(15000), Millis(300000)}};
  join.standby_port = 4000;
  join.restarts_used = 2;
  join.survivors = 3;  // since v7 (issue 36)
  auto decoded = decode_client_frame(encode_frame(ClientMessage(join)), CodecLimits{});
  ASSERT_TRUE(decoded.ok()) << decoded.error_message();
  const auto& back = std::get<JoinMsg>(*decoded);
  EXPECT_EQ(back.node, join.node);
  EXPECT_EQ(back.job, join.job);
  EXPECT_EQ(back.standby_port, 4000);
  EXPECT_EQ(back.restarts_used, 2u);
  EXPECT_EQ(back.survivors, 3u);
}

TEST(CodecTest, JobProgressRoundTripsAndRefusesGarbage) {
  const std::vector<NodeProgress> nodes = {
      {"node-a", "10.0.0.1", 0, {{0, 0, 7, 10, true, 1, "barrier"}, {1, 1, 6, 1500, true}}},
      {"node-b", "10.0.0.2", 1, {{2, 0, -1, 30000, false}}}};
  const std::string payload = encode_job_progress(nodes);
  auto back = decode_job_progress(payload, CodecLimits{});
  ASSERT_TRUE(back.ok()) << back.error_message();
  EXPECT_EQ(*back, nodes);
  for (size_t cut = 0; cut < payload.size(); ++cut) {
    EXPECT_FALSE(decode_job_progress(payload.substr(0, cut), CodecLimits{}).ok()) << cut;
  }
  CodecLimits few;
  few.max_progress_entries = 1;
  EXPECT_FALSE(decode_job_progress(payload, few).ok());
  EXPECT_FALSE(decode_job_progress(payload + "x", CodecLimits{}).ok());
}

TEST(CodecTest, RankProgressRefusesAnUnknownActivityAndALongFrame) {
  const RankProgressEntry good{0, 0, 7, 10, true, 2, "load at data.py:88"};
  ASSERT_TRUE(
      decode_client_frame(encode_frame(ClientMessage(ProgressMsg{1, 1, 0, {good}})), {}).ok());
  RankProgressEntry unknown_activity = good;
  unknown_activity.activity = 5;
  EXPECT_FALSE(
      decode_client_frame(encode_frame(ClientMessage(ProgressMsg{1, 1, 0, {unknown_activity}})), {})
          .ok());
  RankProgressEntry long_where = good;
  long_where.where.assign(257, 'x');
  EXPECT_FALSE(
      decode_client_frame(encode_frame(ClientMessage(ProgressMsg{1, 1, 0, {long_where}})), {})
          .ok());
}

TEST(CodecTest, StragglersRoundTripAndRefuseGarbage) {
  const StragglerFinding finding{
      1500, 4, 200'000, {{1, 1, "10.0.0.1", 420'000}, {3, 1, "10.0.0.2", 390'000}}};
  const std::string payload = encode_stragglers(finding);
  auto back = decode_stragglers(payload, CodecLimits{});
  ASSERT_TRUE(back.ok()) << back.error_message();
  EXPECT_EQ(*back, finding);
  for (size_t cut = 0; cut < payload.size(); ++cut) {
    EXPECT_FALSE(decode_stragglers(payload.substr(0, cut), CodecLimits{}).ok()) << cut;
  }
  EXPECT_FALSE(decode_stragglers(payload + "x", CodecLimits{}).ok());
  // More stragglers than ranks measured cannot be.
  StragglerFinding impossible = finding;
  impossible.ranks_measured = 1;
  EXPECT_FALSE(decode_stragglers(encode_stragglers(impossible), CodecLimits{}).ok());
  CodecLimits few;
  few.max_progress_entries = 1;
  EXPECT_FALSE(decode_stragglers(payload, few).ok());
}

TEST(CodecTest, MalformedFramesHaveTheMalformedKind) {
  auto r = decode_client_frame(std::string("\x00\x00\x00\x01\x7e", 5), CodecLimits{});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().is_malformed());
  const uint8_t zero[4] = {0, 0, 0, 0};
  EXPECT_TRUE(decode_frame_length(std::span<const uint8_t, 4>(zero), CodecLimits{})
                  .status()
                  .is_malformed());
}

TEST(CodecTest, UnknownTypeTrailingBytesAndBadEnumsAreRejected) {
  CodecLimits limits;
  const std::string unknown("\x00\x00\x00\x01\x7e", 5);
  auto r = decode_client_frame(unknown, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("unknown client frame type 0x7e"), std::string::npos);
  std::string trailing = encode_frame(ClientMessage(LeaveMsg{1, {}}));
  trailing += 'x';
  trailing[3] = static_cast<char>(trailing[3] + 1);
  EXPECT_FALSE(decode_client_frame(trailing, limits).ok());
  std::string bad_reason =
      encode_frame(ServerMessage(RestartRequested{1, RestartReason::kScaleUp, "", ""}));
  bad_reason[kFrameHeaderBytes + 1 + 8] = 9;
  EXPECT_FALSE(decode_server_frame(bad_reason, limits).ok());
  // A server frame type sent to the server is unknown there.
  EXPECT_FALSE(decode_client_frame(encode_frame(ServerMessage(HeartbeatAck{})), limits).ok());
}

TEST(CodecTest, RandomGarbageNeverCrashes) {
  std::mt19937 rng(1234);
  CodecLimits limits;
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> body(rng() % 64);
    for (auto& b : body) b = static_cast<uint8_t>(rng());
    (void)decode_client_message(body, limits);
    (void)decode_server_message(body, limits);
  }
}

}  // namespace
}  // namespace ddprun::rdzv

namespace ddprun::rdzv {
namespace {

TEST(CodecTest, StatusReportTravelsWhole) {
  const StatusReport report = sample_status_report();
  auto decoded = decode_server_frame(encode_frame(ServerMessage(report)), CodecLimits{});
  ASSERT_TRUE(decoded.ok()) << decoded.error_message();
  const auto& back = std::get<StatusReport>(*decoded);
  ASSERT_EQ(back.jobs.size(), 2u);
  EXPECT_EQ(back.jobs[0].job_id, "job-1");
  EXPECT_EQ(back.jobs[0].phase, JobPhase::kRunning);
  EXPECT_EQ(back.jobs[0].restart_count, 1u);
  EXPECT_EQ(back.jobs[0].max_restarts, 2u);
  ASSERT_EQ(back.jobs[0].nodes.size(), 2u);
  EXPECT_EQ(back.jobs[0].nodes[0].address, "127.0.0.1:40000");
  EXPECT_EQ(back.jobs[0].nodes[0].last_heard_ms, 120);
  EXPECT_EQ(back.jobs[0].nodes[1].group_rank, -1);
  EXPECT_EQ(back.jobs[0].nodes[1].phase, NodePhase::kIdle);
  EXPECT_EQ(back.excluded_hosts, report.excluded_hosts);
}

// The body of a StatusReport frame, for corrupting.
std::string status_body(const StatusReport& report) {
  return encode_frame(ServerMessage(report)).substr(kFrameHeaderBytes);
}
Result<ServerMessage> decode_body(const std::string& body) {
  return decode_server_message(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(body.data()), body.size()),
      CodecLimits{});
}

TEST(CodecTest, StatusReportCountsAndEnumsAreChecked) {
  StatusReport one;
  one.jobs.push_back({"j", JobPhase::kGathering, 0, 0, 0, 1, 1, 0, {}, {}});
  std::string body = status_body(one);
  // type, truncated, u32 job count: a count far beyond the bytes present is refused before
  // anything is reserved for it.
  std::string huge = body;
  huge[2] = '\x7f';
  EXPECT_TRUE(decode_body(huge).status().is_malformed());
  std::string bad_truncated = body;
  bad_truncated[1] = 2;
  EXPECT_FALSE(decode_body(bad_truncated).ok());
  std::string bad_phase = body;
  bad_phase[1 + 1 + 4 + 4 + 1] = 9;  // the job's phase byte, after its 1-byte id
  EXPECT_FALSE(decode_body(bad_phase).ok());
  StatusReport with_node = one;
  with_node.jobs[0].nodes.push_back({"n", "", NodePhase::kPending, -1, 1, -1});
  std::string node_body = status_body(with_node);
  std::string bad_rank = node_body;
  // The node's group rank (i32) follows node_id, address and phase, and is followed by its
  // local world size, its last_heard, the job's straggler finding (20 bytes, none named) and
  // the report's excluded host count (4): make it -2.
  const size_t rank_at = node_body.size() - 4 - 20 - 8 - 4 - 4;
  bad_rank[rank_at] = '\xff', bad_rank[rank_at + 1] = '\xff', bad_rank[rank_at + 2] = '\xff';
  bad_rank[rank_at + 3] = '\xfe';
  EXPECT_FALSE(decode_body(bad_rank).ok());
  EXPECT_TRUE(decode_body(node_body).ok());
}

// Issue 36: the report's excluded hosts are counted like its jobs: a count beyond the bytes
// present is refused before anything is reserved.
TEST(CodecTest, StatusReportExcludedHostCountIsChecked) {
  StatusReport report;
  report.excluded_hosts.push_back({"h", "r", "j", "h:1", 1, 2});
  const std::string body = status_body(report);
  ASSERT_TRUE(decode_body(body).ok());
  std::string huge = body;
  huge[1 + 1 + 4] = '\x7f';  // type, truncated, job count 0, then the host count
  EXPECT_TRUE(decode_body(huge).status().is_malformed());
  EXPECT_FALSE(decode_body(body + "x").ok());
}

}  // namespace
}  // namespace ddprun::rdzv
