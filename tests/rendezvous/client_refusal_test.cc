// How the client tells a join refused because its host is kept out (issue 36,
// kJoinRefusedHostExcluded) from any other refusal: by the Status's kind, never by its text, so
// that the agent exits 69 (a node kept out) and not 1. A scripted server on port 0 answers the
// join as a server keeping the host out would.
#include <array>
#include <cstdint>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "rendezvous/wire/codec.h"
#include "tests/rendezvous/rdzv_test_util.h"

namespace ddprun::rdzv::testing {
namespace {

using boost::asio::ip::tcp;

// Completes the handshake, then refuses the first join with `refusal` (its request id filled
// in); every other message is read and ignored.
class RefusingServer {
 public:
  RefusingServer(boost::asio::io_context& io, Reply refusal)
      : acceptor_(io), peer_(io), refusal_(std::move(refusal)) {
    acceptor_.open(tcp::v4());
    acceptor_.bind(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
    acceptor_.listen();
    acceptor_.async_accept(peer_, [this](boost::system::error_code ec) {
      if (ec) return;
      out_ = encode_frame(ServerMessage(HelloAck{}));
      boost::asio::async_write(peer_, boost::asio::buffer(out_),
                               [this](boost::system::error_code, size_t) { read_header(); });
    });
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  void read_header() {
    boost::asio::async_read(peer_, boost::asio::buffer(header_),
                            [this](boost::system::error_code ec, size_t) {
                              if (ec) return;
                              auto length = decode_frame_length(header_, CodecLimits{});
                              if (!length) return;
                              body_.resize(*length);
                              read_body();
                            });
  }
  void read_body() {
    boost::asio::async_read(peer_, boost::asio::buffer(body_),
                            [this](boost::system::error_code ec, size_t) {
                              if (ec) return;
                              auto message = decode_client_message(body_, CodecLimits{});
                              if (message) {
                                if (const auto* join = std::get_if<JoinMsg>(&*message))
                                  return refuse(*join);
                              }
                              read_header();
                            });
  }
  void refuse(const JoinMsg& join) {
    Reply reply = refusal_;
    reply.request_id = join.request_id;
    out_ = encode_frame(ServerMessage(reply));
    boost::asio::async_write(peer_, boost::asio::buffer(out_),
                             [this](boost::system::error_code, size_t) { read_header(); });
  }

  tcp::acceptor acceptor_;
  tcp::socket peer_;
  Reply refusal_;
  std::string out_;
  std::array<uint8_t, kFrameHeaderBytes> header_{};
  std::vector<uint8_t> body_;
};

// The join's outcome when the server answers it with `refusal`.
Status join_answered_with(Reply refusal) {
  boost::asio::io_context io;
  RefusingServer server(io, std::move(refusal));
  ClientOptions options = node_options(server.port(), "job", 0);
  options.keep_alive_interval = 1s;  // the scripted server answers no heartbeat
  options.heartbeat_timeout = 8s;
  auto node = start_node(io, options);
  if (!run_until(io, [&] { return node->connected.has_value(); }) || !node->connected->ok()) {
    return Status::error("no connection");
  }
  start_join(*node, join_request("node-0", 1, 2));
  if (!run_until(io, [&] { return node->assignment.has_value(); })) {
    return Status::error("no answer to the join");
  }
  return node->assignment->ok() ? Status() : node->assignment->status();
}

TEST(ClientJoinRefusal, AHostKeptOutIsItsOwnKindWithTheServersSentence) {
  Reply kept_out;
  kept_out.ok = false;
  kept_out.error = "host gpu-07 is kept out of job 'job' until 12:00:00 UTC: ECC errors";
  kept_out.integer = kJoinRefusedHostExcluded;
  const Status refused = join_answered_with(kept_out);
  EXPECT_TRUE(refused.is_excluded()) << refused.message();
  EXPECT_EQ(refused.message(), kept_out.error);
}

TEST(ClientJoinRefusal, AnyOtherRefusalStaysRefused) {
  Reply other;
  other.ok = false;
  other.error = "the job's terms differ";
  const Status refused = join_answered_with(other);
  EXPECT_TRUE(refused.is_refused()) << refused.message();
}

}  // namespace
}  // namespace ddprun::rdzv::testing
