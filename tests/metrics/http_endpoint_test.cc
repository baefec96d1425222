// The HTTP endpoint in-process on port 0, served from its own thread (like another process):
// the two routes, every refusal (404, 405, 400, 431, 413), keep-alive, the read deadline, the
// connection limit, close(), and close-on-exec sockets.
#include "metrics/http_endpoint.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <future>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "tests/metrics/http_client.h"
#include "tests/support/descriptor_exhaustion.h"

namespace ddprun::metrics {
namespace {

using namespace std::chrono_literals;
using ddprun::testing::DescriptorExhaustion;
using ddprun::testing::http_get;
using ddprun::testing::most_resting_accepts;
using ddprun::testing::raw_exchange;
using ddprun::testing::status_of;

// An endpoint on its own io_context thread; the handlers read state the test sets.
class EndpointThread {
 public:
  explicit EndpointThread(HttpEndpointOptions options)
      : endpoint_(
            io_, options,
            [this] {
              std::lock_guard lock(mutex_);
              ++scrapes_;
              return metrics_text_;
            },
            [this] {
              std::lock_guard lock(mutex_);
              return health_;
            }) {
    Status s = endpoint_.listen();
    EXPECT_TRUE(s.ok()) << s.message();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~EndpointThread() {
    boost::asio::post(io_, [this] {
      endpoint_.close();
      work_.reset();
    });
    thread_.join();
  }
  uint16_t port() const { return endpoint_.port(); }
  void set_health(Status s) {
    std::lock_guard lock(mutex_);
    health_ = std::move(s);
  }
  int scrapes() {
    std::lock_guard lock(mutex_);
    return scrapes_;
  }
  template <class F>
  auto on_loop(F f) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    boost::asio::post(io_, [&task] { task(); });
    return result.get();
  }
  HttpEndpoint& endpoint() { return endpoint_; }
  // Waits (10 s at most) until the endpoint holds `count` connections: it accepts and notices
  // hang-ups asynchronously. True when it did.
  bool wait_for_connections(size_t count) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (on_loop([&] { return endpoint_.connections(); }) != count) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_{
      io_.get_executor()};
  std::mutex mutex_;
  std::string metrics_text_ = "# TYPE x gauge\nx 1\n";
  Status health_;
  int scrapes_ = 0;
  HttpEndpoint endpoint_;
  std::thread thread_;
};

HttpEndpointOptions quick_options() {
  HttpEndpointOptions o;
  o.read_timeout = 300ms;
  o.max_request_bytes = 1024;
  o.max_connections = 4;
  return o;
}

TEST(HttpEndpoint, ServesMetricsInTheTextFormat) {
  EndpointThread server(quick_options());
  ASSERT_NE(server.port(), 0);
  auto reply = http_get("127.0.0.1", server.port(), "/metrics");
  ASSERT_TRUE(reply.ok()) << reply.error_message();
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(reply->body, "# TYPE x gauge\nx 1\n");
  auto with_query = http_get("127.0.0.1", server.port(), "/metrics?name[]=x");
  ASSERT_TRUE(with_query.ok()) << with_query.error_message();
  EXPECT_EQ(with_query->status, 200);
  EXPECT_EQ(server.scrapes(), 2);
}

TEST(HttpEndpoint, HealthzSays200OrThe503Reason) {
  EndpointThread server(quick_options());
  auto ok = http_get("127.0.0.1", server.port(), "/healthz");
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, "ok\n");
  server.set_health(Status::error("the job failed (exit code 3)"));
  auto down = http_get("127.0.0.1", server.port(), "/healthz");
  ASSERT_TRUE(down.ok()) << down.error_message();
  EXPECT_EQ(down->status, 503);
  EXPECT_EQ(down->body, "the job failed (exit code 3)\n");
}

TEST(HttpEndpoint, UnknownPathIs404AndOtherMethods405) {
  EndpointThread server(quick_options());
  auto missing = http_get("127.0.0.1", server.port(), "/metricsx");
  ASSERT_TRUE(missing.ok()) << missing.error_message();
  EXPECT_EQ(missing->status, 404);
  EXPECT_NE(missing->body.find("/metricsx"), std::string::npos) << missing->body;
  auto post = raw_exchange("127.0.0.1", server.port(),
                           "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                           "Connection: close\r\n\r\nhi");
  ASSERT_TRUE(post.ok()) << post.error_message();
  EXPECT_EQ(status_of(*post), 405) << *post;
  EXPECT_NE(post->find("Allow: GET"), std::string::npos) << *post;
  EXPECT_EQ(server.scrapes(), 0);
}

TEST(HttpEndpoint, MalformedRequestIs400AndClosed) {
  EndpointThread server(quick_options());
  auto reply = raw_exchange("127.0.0.1", server.port(), "\x01\x02 garbage\r\n\r\n");
  ASSERT_TRUE(reply.ok()) << reply.error_message();
  EXPECT_EQ(status_of(*reply), 400) << *reply;
  auto bad_version = raw_exchange("127.0.0.1", server.port(), "GET /metrics HTTP/x.y\r\n\r\n");
  ASSERT_TRUE(bad_version.ok()) << bad_version.error_message();
  EXPECT_EQ(status_of(*bad_version), 400) << *bad_version;
}

TEST(HttpEndpoint, OversizedRequestsAreRefused) {
  EndpointThread server(quick_options());
  const std::string big_header =
      "GET /metrics HTTP/1.1\r\nX-Big: " + std::string(4096, 'a') + "\r\n\r\n";
  auto header = raw_exchange("127.0.0.1", server.port(), big_header);
  ASSERT_TRUE(header.ok()) << header.error_message();
  EXPECT_EQ(status_of(*header), 431) << *header;
  const std::string big_body =
      "POST /metrics HTTP/1.1\r\nContent-Length: 100000\r\n\r\n" + std::string(2048, 'b');
  auto body = raw_exchange("127.0.0.1", server.port(), big_body);
  ASSERT_TRUE(body.ok()) << body.error_message();
  EXPECT_EQ(status_of(*body), 413) << *body;
  EXPECT_EQ(server.scrapes(), 0);
}

TEST(HttpEndpoint, KeepAliveServesSeveralRequestsOnOneConnection) {
  EndpointThread server(quick_options());
  auto replies = raw_exchange("127.0.0.1", server.port(),
                              "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                              "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  ASSERT_TRUE(replies.ok()) << replies.error_message();
  EXPECT_EQ(status_of(*replies), 200);
  const auto second = replies->find("HTTP/1.1 200", 1);
  ASSERT_NE(second, std::string::npos) << *replies;
  EXPECT_NE(replies->find("x 1\n", second), std::string::npos) << *replies;
}

TEST(HttpEndpoint, ReadDeadlineClosesAStalledRequest) {
  EndpointThread server(quick_options());  // read_timeout 300 ms
  // Half a request line, then nothing: the server must hang up by itself (the bound is far
  // above the deadline; how soon is not asserted).
  auto reply = raw_exchange("127.0.0.1", server.port(), "GET /metr", 10s);
  ASSERT_TRUE(reply.ok()) << reply.error_message();
  EXPECT_EQ(*reply, "");
  EXPECT_EQ(server.scrapes(), 0);
}

// Opens a connection and keeps it idle; returns the socket.
boost::asio::ip::tcp::socket idle_connection(boost::asio::io_context& io, uint16_t port) {
  boost::asio::ip::tcp::socket s(io);
  s.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  return s;
}

TEST(HttpEndpoint, ConnectionsBeyondTheLimitGetA503AndAreClosed) {
  HttpEndpointOptions options = quick_options();
  options.read_timeout = 30s;  // the idle ones must stay while the test runs
  EndpointThread server(options);
  boost::asio::io_context io;
  std::vector<boost::asio::ip::tcp::socket> idle;
  for (size_t i = 0; i < options.max_connections; ++i)
    idle.push_back(idle_connection(io, server.port()));
  ASSERT_TRUE(server.wait_for_connections(idle.size())) << "connections not accepted";
  auto refused = raw_exchange("127.0.0.1", server.port(), "GET /metrics HTTP/1.1\r\n\r\n", 10s);
  ASSERT_TRUE(refused.ok()) << refused.error_message();
  EXPECT_EQ(status_of(*refused), 503) << *refused;
  EXPECT_NE(refused->find("too many connections"), std::string::npos) << *refused;
  EXPECT_EQ(server.scrapes(), 0);
  idle.clear();  // room again
  ASSERT_TRUE(server.wait_for_connections(0)) << "closed connections not noticed";
  auto served = http_get("127.0.0.1", server.port(), "/healthz");
  ASSERT_TRUE(served.ok()) << served.error_message();
  EXPECT_EQ(served->status, 200);
}

// Out of file descriptors, the endpoint sheds newcomers (accepts each with its spare
// descriptor and closes it) without spinning, keeps serving the connection it has, and serves
// newcomers again once descriptors are free.
TEST(HttpEndpoint, OutOfDescriptorsItShedsNewcomersKeepsServingAndDoesNotSpin) {
  HttpEndpointOptions options = quick_options();
  options.read_timeout = 30s;
  EndpointThread server(options);
  boost::asio::io_context io;
  auto existing = idle_connection(io, server.port());
  ASSERT_TRUE(server.wait_for_connections(1)) << "the first connection not accepted";
  std::vector<boost::asio::ip::tcp::socket> newcomers;
  for (int i = 0; i < 6; ++i) newcomers.emplace_back(io, boost::asio::ip::tcp::v4());
  const boost::asio::ip::tcp::endpoint at(boost::asio::ip::make_address("127.0.0.1"),
                                          server.port());
  {
    DescriptorExhaustion full;
    ASSERT_TRUE(full.full());
    const auto started = std::chrono::steady_clock::now();
    const auto tried_before = server.on_loop(
        [&] { return server.endpoint().accept_counters().out_of_descriptor_accepts; });
    for (auto& s : newcomers) s.connect(at);  // the kernel completes them into the backlog
    // Each newcomer is shed: closed unanswered (end of file), one per accept.
    timeval tv{10, 0};
    for (auto& s : newcomers) {
      ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      char byte = 0;
      EXPECT_EQ(::recv(s.native_handle(), &byte, 1, 0), 0) << "a newcomer was not shed";
    }
    // The connection it had is still served, on the same socket.
    const std::string request = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_EQ(::send(existing.native_handle(), request.data(), request.size(), 0),
              static_cast<ssize_t>(request.size()));
    ::setsockopt(existing.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char reply[512];
    const ssize_t n = ::recv(existing.native_handle(), reply, sizeof reply, 0);
    ASSERT_GT(n, 0);
    EXPECT_EQ(status_of(std::string(reply, static_cast<size_t>(n))), 200);
    const auto tried = server.on_loop([&] {
      return server.endpoint().accept_counters().out_of_descriptor_accepts;
    }) - tried_before;
    const auto wall = std::chrono::steady_clock::now() - started;
    RecordProperty("accepts_while_out_of_descriptors", std::to_string(tried));
    // One failing accept per newcomer at least, and a rest after each: a loop that retried
    // accept at once would have tried thousands of times.
    EXPECT_GE(tried, 6u);
    EXPECT_LE(tried, most_resting_accepts(wall, ddprun::Listener::kDescriptorPause, 1))
        << "accepts tried in "
        << std::chrono::duration_cast<std::chrono::milliseconds>(wall).count() << " ms";
  }
  auto served = http_get("127.0.0.1", server.port(), "/healthz");
  ASSERT_TRUE(served.ok()) << served.error_message();
  EXPECT_EQ(served->status, 200);
}

TEST(HttpEndpoint, CloseEndsOpenConnections) {
  HttpEndpointOptions options = quick_options();
  options.read_timeout = 30s;
  EndpointThread server(options);
  boost::asio::io_context io;
  auto socket = idle_connection(io, server.port());
  ASSERT_TRUE(server.wait_for_connections(1));
  server.on_loop([&] {
    server.endpoint().close();
    return 0;
  });
  // The peer sees end of file at once (well within the 30 s read timeout); bounded by
  // SO_RCVTIMEO so a regression fails instead of hanging.
  timeval tv{10, 0};
  ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char byte = 0;
  EXPECT_EQ(::recv(socket.native_handle(), &byte, 1, 0), 0);
  EXPECT_FALSE(http_get("127.0.0.1", server.port(), "/healthz").ok());
}

// The local port of socket `fd`, or 0 when it is not an IPv4 TCP socket.
uint16_t local_port(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0 || sa.sin_family != AF_INET) {
    return 0;
  }
  return ntohs(sa.sin_port);
}

TEST(HttpEndpoint, EverySocketIsCloseOnExec) {
  HttpEndpointOptions options = quick_options();
  options.read_timeout = 30s;
  EndpointThread server(options);
  boost::asio::io_context io;
  auto client = idle_connection(io, server.port());
  ASSERT_TRUE(server.wait_for_connections(1));
  // The listening socket and the accepted one both have the endpoint's local port.
  int server_sockets = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  ASSERT_NE(dir, nullptr);
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const int fd = std::atoi(e->d_name);
    if (fd == client.native_handle() || local_port(fd) != server.port()) continue;
    ++server_sockets;
    EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC) << "fd " << fd;
  }
  ::closedir(dir);
  EXPECT_EQ(server_sockets, 2);
}

TEST(HttpEndpoint, ListenErrorsNameTheAddress) {
  boost::asio::io_context io;
  HttpEndpointOptions options;
  options.address = "not an address!";
  HttpEndpoint endpoint(
      io, options, [] { return std::string(); }, [] { return Status(); });
  Status s = endpoint.listen();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not an address!"), std::string::npos) << s.message();

  EndpointThread taken(quick_options());
  HttpEndpointOptions same;
  same.port = taken.port();
  HttpEndpoint second(
      io, same, [] { return std::string(); }, [] { return Status(); });
  Status busy = second.listen();
  ASSERT_FALSE(busy.ok());
  EXPECT_NE(busy.message().find("127.0.0.1:" + std::to_string(taken.port())), std::string::npos)
      << busy.message();
}

}  // namespace
}  // namespace ddprun::metrics
