// The connection's read buffer: how much room it offers for each read (small by default, what
// the decoder needs, doubling while reads fill it, never more than kMaxGrowth beyond the bytes
// held), that the bytes survive growth and consumption in order, and that a drained large
// buffer is given back.
#include "store/read_buffer.h"

#include <cstring>
#include <string>

#include <gtest/gtest.h>

namespace ddprun::store::detail {
namespace {

// Writes `text` into the buffer as a read would.
void receive(ReadBuffer& buffer, const std::string& text, size_t need = 0) {
  auto space = buffer.space(need);
  ASSERT_GE(space.size(), text.size());
  std::memcpy(space.data(), text.data(), text.size());
  buffer.commit(text.size());
}

std::string held(const ReadBuffer& buffer) {
  return {reinterpret_cast<const char*>(buffer.data().data()), buffer.size()};
}

TEST(StoreReadBufferTest, OffersASmallReadByDefault) {
  ReadBuffer buffer;
  EXPECT_EQ(buffer.space(1).size(), ReadBuffer::kInitial);
  EXPECT_EQ(buffer.capacity(), ReadBuffer::kInitial);
}

TEST(StoreReadBufferTest, GrowsToWhatTheDecoderNeeds) {
  ReadBuffer buffer;
  receive(buffer, "header");
  EXPECT_GE(buffer.space(100'000).size(), 100'000u - 6);
  EXPECT_EQ(held(buffer), "header");
}

TEST(StoreReadBufferTest, GrowsByAtMostMaxGrowthBeyondTheBytesHeld) {
  ReadBuffer buffer;
  receive(buffer, "x");
  const size_t claimed = 1u << 30;  // a header claiming a 1 GiB value
  EXPECT_EQ(buffer.space(claimed).size(), ReadBuffer::kMaxGrowth);
  EXPECT_LE(buffer.capacity(), 1 + ReadBuffer::kMaxGrowth);
}

TEST(StoreReadBufferTest, DoublesWhileReadsFillIt) {
  ReadBuffer buffer;
  std::string sent;
  for (int i = 0; i < 4; ++i) {
    const size_t room = buffer.space(0).size();
    const std::string chunk(room, static_cast<char>('a' + i));
    receive(buffer, chunk);
    sent += chunk;
  }
  EXPECT_EQ(buffer.size(), 8 * ReadBuffer::kInitial);  // 512 + 512 + 1024 + 2048
  EXPECT_EQ(held(buffer), sent);
  EXPECT_EQ(buffer.space(0).size(), 8 * ReadBuffer::kInitial);
}

TEST(StoreReadBufferTest, ConsumeKeepsTheRestInOrder) {
  ReadBuffer buffer;
  receive(buffer, "first|second");
  buffer.consume(6);
  EXPECT_EQ(held(buffer), "second");
  receive(buffer, "|third");
  EXPECT_EQ(held(buffer), "second|third");
  buffer.consume(buffer.size());
  EXPECT_TRUE(buffer.empty());
  EXPECT_EQ(buffer.capacity(), ReadBuffer::kInitial);  // a small buffer is kept
}

TEST(StoreReadBufferTest, ADrainedLargeBufferIsGivenBack) {
  ReadBuffer buffer;
  receive(buffer, std::string(200'000, 'v'), 200'000);
  EXPECT_GT(buffer.capacity(), ReadBuffer::kKeepAtMost);
  buffer.consume(100'000);
  EXPECT_GT(buffer.capacity(), ReadBuffer::kKeepAtMost);  // still holding bytes
  buffer.consume(100'000);
  EXPECT_EQ(buffer.capacity(), 0u);
  EXPECT_EQ(buffer.space(1).size(), ReadBuffer::kInitial);
}

}  // namespace
}  // namespace ddprun::store::detail
