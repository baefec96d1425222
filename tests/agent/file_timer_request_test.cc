// The file-timer wire codec on byte strings: torch's exact lines, every malformed shape, and
// the bounded line splitter.
#include "agent/file_timer/file_timer_request.h"

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

namespace ddprun::agent {
namespace {

// What torch 1.13's and 2.x's FileTimerRequest.to_json() write (json.dumps, default spacing).
constexpr char kTorchAcquire[] = R"({"version": 1, "pid": 4242, "scope_id": "/job/train.py#17", )"
                                 R"("expiration_time": 1700000000.25, "signal": 9})";
constexpr char kTorchRelease[] =
    R"({"version": 1, "pid": 4242, "scope_id": "/job/train.py#17", "expiration_time": -1, )"
    R"("signal": 0})";

std::string malformed_message(std::string_view line) {
  Result<FileTimerRequest> r = parse_file_timer_request(line);
  EXPECT_FALSE(r.ok()) << line;
  if (r.ok()) return "";
  EXPECT_TRUE(r.status().is_malformed()) << r.error_message();
  return r.error_message();
}

TEST(FileTimerRequest, DecodesTorchsAcquire) {
  Result<FileTimerRequest> r = parse_file_timer_request(kTorchAcquire);
  ASSERT_TRUE(r.ok()) << r.error_message();
  EXPECT_EQ(r->pid, 4242);
  EXPECT_EQ(r->scope_id, "/job/train.py#17");
  EXPECT_DOUBLE_EQ(r->expiration_time, 1700000000.25);
  EXPECT_EQ(r->signal, 9);
  EXPECT_FALSE(r->is_release());
}

TEST(FileTimerRequest, NegativeExpirationIsARelease) {
  Result<FileTimerRequest> r = parse_file_timer_request(kTorchRelease);
  ASSERT_TRUE(r.ok()) << r.error_message();
  EXPECT_TRUE(r->is_release());
  EXPECT_EQ(r->signal, 0);
}

TEST(FileTimerRequest, AcceptsIntegerExpirationNoVersionAndUnknownFields) {
  Result<FileTimerRequest> r = parse_file_timer_request(
      R"({"pid": 7, "scope_id": "", "expiration_time": 1700000000, "signal": -3, "x": [1]})");
  ASSERT_TRUE(r.ok()) << r.error_message();
  EXPECT_DOUBLE_EQ(r->expiration_time, 1700000000.0);
  EXPECT_EQ(r->signal, -3);  // <= 0: expire without killing, as the client documents
}

TEST(FileTimerRequest, EachMissingFieldIsNamed) {
  for (const char* field : {"pid", "scope_id", "expiration_time", "signal"}) {
    nlohmann::json j = nlohmann::json::parse(kTorchAcquire);
    j.erase(field);
    EXPECT_NE(malformed_message(j.dump()).find(std::string("no \"") + field + "\""),
              std::string::npos)
        << field;
  }
}

TEST(FileTimerRequest, WrongTypesAndRangesAreMalformed) {
  const char* bad_lines[] = {
      R"({"pid": "4242", "scope_id": "s", "expiration_time": 1.0, "signal": 9})",
      R"({"pid": 42.5, "scope_id": "s", "expiration_time": 1.0, "signal": 9})",
      R"({"pid": 0, "scope_id": "s", "expiration_time": 1.0, "signal": 9})",
      R"({"pid": -5, "scope_id": "s", "expiration_time": 1.0, "signal": 9})",
      R"({"pid": 1099511627776, "scope_id": "s", "expiration_time": 1.0, "signal": 9})",
      R"({"pid": 18446744073709551615, "scope_id": "s", "expiration_time": 1.0, "signal": 9})",
      R"({"pid": 1, "scope_id": 5, "expiration_time": 1.0, "signal": 9})",
      R"({"pid": 1, "scope_id": "s", "expiration_time": "soon", "signal": 9})",
      R"({"pid": 1, "scope_id": "s", "expiration_time": 1.0, "signal": 99})",
      R"({"pid": 1, "scope_id": "s", "expiration_time": 1.0, "signal": "SIGKILL"})",
  };
  for (const char* line : bad_lines) malformed_message(line);
  EXPECT_NE(malformed_message(bad_lines[8]).find("\"signal\" is out of range"), std::string::npos);
}

TEST(FileTimerRequest, NotJsonOrNotAnObjectIsMalformed) {
  EXPECT_NE(malformed_message("hello").find("not JSON"), std::string::npos);
  EXPECT_NE(malformed_message(R"({"pid": 1, "scope_id")").find("not JSON"), std::string::npos);
  // Python's json.dumps writes NaN for float('nan'): not JSON, and not a time anyway.
  malformed_message(R"({"pid": 1, "scope_id": "s", "expiration_time": NaN, "signal": 9})");
  EXPECT_NE(malformed_message("[1, 2]").find("not a JSON object"), std::string::npos);
  malformed_message(std::string("{\"pid\": 1, \"scope_id\": \"\xff\xfe\"}"));
}

TEST(FileTimerRequest, ErrorQuotesThePrintableStartOfTheLineOnly) {
  std::string line = "\x1b[31m" + std::string(200, 'z');
  const std::string message = malformed_message(line);
  EXPECT_EQ(message.find('\x1b'), std::string::npos);
  EXPECT_NE(message.find("?[31mzzz"), std::string::npos);
  EXPECT_EQ(message.find(std::string(81, 'z')), std::string::npos) << message;
}

TEST(FileTimerRequest, LineOfPipeBufOrMoreIsRefusedBeforeParsing) {
  std::string line(kMaxFileTimerRequestBytes, ' ');
  EXPECT_NE(malformed_message(line).find("longer than 4095 bytes"), std::string::npos);
}

TEST(FileTimerLineSplitter, JoinsChunksAndSplitsBatches) {
  FileTimerLineSplitter splitter;
  EXPECT_TRUE(splitter.feed("{\"a\":").empty());
  EXPECT_EQ(splitter.pending(), 5u);
  auto lines = splitter.feed("1}\n\n{\"b\":2}\n{\"c\"");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(*lines[0], "{\"a\":1}");
  EXPECT_EQ(*lines[1], "{\"b\":2}");  // the empty line between them is skipped
  lines = splitter.feed(":3}\n");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(*lines[0], "{\"c\":3}");
  EXPECT_EQ(splitter.pending(), 0u);
}

TEST(FileTimerLineSplitter, OverlongLineIsReportedOnceAndSkippedToItsEnd) {
  FileTimerLineSplitter splitter(16);
  auto out = splitter.feed(std::string(10, 'x'));
  EXPECT_TRUE(out.empty());
  out = splitter.feed(std::string(10, 'y'));  // 20 > 16: reported now, bytes dropped
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].status().is_malformed());
  EXPECT_NE(out[0].error_message().find("longer than 16 bytes"), std::string::npos);
  EXPECT_EQ(splitter.pending(), 0u);
  EXPECT_TRUE(splitter.feed(std::string(1000, 'z')).empty());  // still the same line: no repeat
  EXPECT_EQ(splitter.pending(), 0u);                           // and nothing held
  out = splitter.feed("zz\nok\n");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(*out[0], "ok");
}

TEST(FileTimerLineSplitter, LineOfExactlyTheLimitPasses) {
  FileTimerLineSplitter splitter(4);
  auto out = splitter.feed("abcd\nabcde\n");
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(*out[0], "abcd");
  EXPECT_FALSE(out[1].ok());
}

}  // namespace
}  // namespace ddprun::agent
