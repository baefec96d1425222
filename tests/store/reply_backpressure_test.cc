// Replies a client does not read at once: the store sends what the socket takes and queues the
// rest behind one asynchronous write (store/connection.h). Everything arrives, in order, when
// the client reads at last; a client that lets more than max_outbox_bytes pile up is dropped
// while the others are served.
#include <string>

#include "tests/store/init_traffic.h"
#include "tests/store/store_test_util.h"

namespace ddprun::store::testing {
namespace {

// 64 replies of 256 KiB: 16 MiB, more than loopback's socket buffers hold on both sides.
constexpr int kReplies = 64;
const std::string& big_value() {
  static const std::string value = [] {
    std::string v(256u << 10, '\0');
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<char>('a' + i % 26);
    return v;
  }();
  return value;
}

// Sends `kReplies` GETs of the big key, each followed by an ADD that numbers it, reading nothing.
void ask_without_reading(TestClient& c) {
  for (int i = 0; i < kReplies; ++i) {
    c.send(make(Op::kGet, {"/big"}));
    c.send(make(Op::kAdd, {"/n"}, {}, 1));
  }
}

TEST(StoreReplyBackpressureTest, RepliesBeyondTheSocketBuffersArriveWholeAndInOrder) {
  StoreThread store;
  auto c = TestClient::connect(store.port(), Dialect::kValidated);
  ASSERT_TRUE(c);
  c->set("/big", big_value());
  ask_without_reading(*c);
  for (int i = 0; i < kReplies; ++i) {
    ASSERT_EQ(c->read_value(), big_value()) << "reply " << i;
    ASSERT_EQ(c->read_i64(), i + 1) << "reply " << i;
  }
  EXPECT_EQ(c->num_keys(), 2);  // the connection goes on
  EXPECT_EQ(store.stats().slow_readers_dropped, 0u);
}

TEST(StoreReplyBackpressureTest, AClientPastMaxOutboxBytesIsDroppedOthersAreServed) {
  StoreServerOptions options;
  options.max_outbox_bytes = 1u << 20;  // less than the 16 MiB asked for, more than one reply
  StoreThread store(options);
  auto other = TestClient::connect(store.port(), Dialect::kLegacy);
  auto hog = TestClient::connect(store.port(), Dialect::kValidated);
  ASSERT_TRUE(other && hog);
  hog->set("/big", big_value());
  ask_without_reading(*hog);
  EXPECT_TRUE(hog->wait_closed());
  EXPECT_EQ(store.stats().slow_readers_dropped, 1u);
  EXPECT_EQ(other->get("/big"), big_value());
  EXPECT_EQ(other->add("/m", 5), 5);
}

}  // namespace
}  // namespace ddprun::store::testing
