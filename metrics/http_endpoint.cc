#include "metrics/http_endpoint.h"

#include <optional>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include "common/tcp_listener.h"

namespace ddprun::metrics {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct HttpEndpoint::Shared {
  HttpEndpointOptions options;
  MetricsHandler metrics;
  HealthHandler health;
  bool open = true;
  std::unordered_set<beast::tcp_stream*> streams;  // the open connections
};

namespace {

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

Response text_response(http::status status, unsigned version, std::string body,
                       const char* content_type = "text/plain; charset=utf-8") {
  Response response{status, version};
  response.set(http::field::server, "ddprun");
  response.set(http::field::content_type, content_type);
  response.body() = std::move(body);
  response.prepare_payload();
  return response;
}

Response respond(const HttpEndpoint::Shared& shared, const Request& request) {
  const std::string_view target(request.target().data(), request.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  Response response;
  if (request.method() != http::verb::get) {
    response = text_response(http::status::method_not_allowed, request.version(),
                             "only GET is served here\n");
    response.set(http::field::allow, "GET");
  } else if (path == "/metrics") {
    response =
        text_response(http::status::ok, request.version(), shared.metrics(), kMetricsContentType);
  } else if (path == "/healthz") {
    const Status health = shared.health();
    response = health ? text_response(http::status::ok, request.version(), "ok\n")
                      : text_response(http::status::service_unavailable, request.version(),
                                      health.message() + "\n");
  } else {
    response = text_response(http::status::not_found, request.version(),
                             fmt::format("not found: {} (try /metrics or /healthz)\n", path));
  }
  response.keep_alive(request.keep_alive());
  return response;
}

// The answer owed to a request that could not be read, if any: bad requests deserve one, a
// peer that went silent or away does not.
std::optional<http::status> status_for_read_error(const boost::system::error_code& ec) {
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    return http::status::request_header_fields_too_large;
  }
  if (ec == http::error::body_limit) return http::status::payload_too_large;
  if (ec == http::error::end_of_stream || ec == http::error::partial_message) return std::nullopt;
  if (ec.category() == http::make_error_code(http::error::bad_target).category()) {
    return http::status::bad_request;
  }
  return std::nullopt;  // timeout, reset, cancelled
}

// Keeps the stream in the shared set while its connection coroutine lives, so close() can
// reach it.
class Registration {
 public:
  Registration(std::shared_ptr<HttpEndpoint::Shared> shared, beast::tcp_stream* stream)
      : shared_(std::move(shared)), stream_(stream) {
    shared_->streams.insert(stream_);
  }
  ~Registration() { shared_->streams.erase(stream_); }
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

 private:
  std::shared_ptr<HttpEndpoint::Shared> shared_;
  beast::tcp_stream* stream_;
};

asio::awaitable<void> serve_connection(std::shared_ptr<HttpEndpoint::Shared> shared,
                                       tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  Registration registration(shared, &stream);
  const HttpEndpointOptions& options = shared->options;
  beast::flat_buffer buffer(options.max_request_bytes);  // its maximum size
  boost::system::error_code ec;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(options.max_request_bytes);
    parser.body_limit(options.max_request_bytes);
    stream.expires_after(options.read_timeout);
    co_await http::async_read(stream, buffer, parser,
                              asio::redirect_error(asio::use_awaitable, ec));
    if (!shared->open) co_return;
    Response response;
    if (ec) {
      const auto status = status_for_read_error(ec);
      if (!status) break;
      response = text_response(*status, 11, fmt::format("bad request: {}\n", ec.message()));
      response.keep_alive(false);
    } else {
      response = respond(*shared, parser.get());
    }
    stream.expires_after(options.read_timeout);
    co_await http::async_write(stream, response, asio::redirect_error(asio::use_awaitable, ec));
    if (ec || !shared->open || !response.keep_alive()) break;
  }
  if (!shared->open) co_return;  // close() has closed the socket
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream.close();
}

}  // namespace

HttpEndpoint::HttpEndpoint(asio::io_context& io, HttpEndpointOptions options,
                           MetricsHandler metrics, HealthHandler health)
    : io_(io),
      options_(std::move(options)),
      acceptor_(io),
      shared_(std::make_shared<Shared>(
          Shared{options_, std::move(metrics), std::move(health), true, {}})) {}

HttpEndpoint::~HttpEndpoint() { close(); }

Status HttpEndpoint::listen() {
  boost::system::error_code ec;
  tcp::resolver resolver(io_);
  auto results = resolver.resolve(options_.address, std::to_string(options_.port), ec);
  if (ec || results.empty()) {
    return Status::invalid_argument(fmt::format("metrics endpoint: cannot resolve '{}': {}",
                                                options_.address,
                                                ec ? ec.message() : "no addresses"));
  }
  const tcp::endpoint endpoint = results.begin()->endpoint();
  auto fail = [&](const char* step) {
    return Status::unavailable(fmt::format("metrics endpoint: {} {}:{} failed: {}", step,
                                           endpoint.address().to_string(), options_.port,
                                           ec.message()));
  };
  if (const char* step = open_listener(acceptor_, endpoint, options_.backlog, ec)) {
    return fail(step);
  }
  port_ = acceptor_.local_endpoint(ec).port();
  asio::co_spawn(io_, accept_loop(), [](std::exception_ptr error) {
    if (error) spdlog::error("metrics endpoint: accept loop ended with an exception");
  });
  return {};
}

asio::awaitable<void> HttpEndpoint::accept_loop() {
  auto shared = shared_;  // `this` may be gone when an accept completes after close()
  boost::system::error_code ec;
  for (;;) {
    tcp::socket socket =
        co_await acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (!shared->open || ec == asio::error::operation_aborted) co_return;
    if (ec) {
      // EMFILE and friends: keep serving the connections we have; retry on the next accept.
      spdlog::warn("metrics endpoint: accept failed: {}", ec.message());
      continue;
    }
    set_cloexec(socket.native_handle());
    if (shared->streams.size() >= options_.max_connections) {
      socket.close(ec);
      continue;
    }
    asio::co_spawn(io_, serve_connection(shared, std::move(socket)), [](std::exception_ptr error) {
      if (error)
        spdlog::error(
            "metrics endpoint: a connection ended with an "
            "exception");
    });
  }
}

void HttpEndpoint::close() {
  if (!shared_->open) return;
  shared_->open = false;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  const std::vector<beast::tcp_stream*> streams(shared_->streams.begin(), shared_->streams.end());
  for (beast::tcp_stream* stream : streams) stream->close();
}

size_t HttpEndpoint::connections() const { return shared_->streams.size(); }

}  // namespace ddprun::metrics
