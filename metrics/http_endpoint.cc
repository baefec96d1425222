#include "metrics/http_endpoint.h"

#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

namespace ddprun::metrics {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct HttpEndpoint::Shared {
  HttpEndpointOptions options;
  MetricsHandler metrics;
  HealthHandler health;
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

// One HTTP connection: a coroutine that reads requests and writes responses until the peer is
// done, a read times out, or the endpoint closes it.
class HttpConnection final : public ServedConnection,
                             public std::enable_shared_from_this<HttpConnection> {
 public:
  HttpConnection(tcp::socket socket, std::shared_ptr<HttpEndpoint::Shared> shared, bool refuse,
                 std::function<void()> ended)
      : stream_(std::move(socket)),
        shared_(std::move(shared)),
        refuse_(refuse),
        ended_(std::move(ended)) {}

  void start() override {
    auto self = shared_from_this();
    asio::co_spawn(
        stream_.get_executor(), [self] { return self->serve(); },
        LogCoroutineEnd{"metrics endpoint connection"});
  }
  // A scrape is short: both stages close now.
  void close_gracefully(const std::string&) override { close_now(); }
  void close_now() override {
    if (closed_) return;
    closed_ = true;
    stream_.close();
  }

 private:
  asio::awaitable<void> serve() {
    if (refuse_) {
      co_await answer_refusal();
    } else {
      co_await answer_requests();
    }
    if (!closed_) {
      boost::system::error_code ec;
      stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
      close_now();
    }
    if (ended_) std::exchange(ended_, nullptr)();
  }

  // Over max_connections: one 503, then close.
  asio::awaitable<void> answer_refusal() {
    Response response = text_response(http::status::service_unavailable, 11,
                                      "too many connections to the metrics endpoint\n");
    response.keep_alive(false);
    boost::system::error_code ec;
    stream_.expires_after(shared_->options.read_timeout);
    co_await http::async_write(stream_, response, asio::redirect_error(asio::use_awaitable, ec));
  }

  asio::awaitable<void> answer_requests() {
    const HttpEndpointOptions& options = shared_->options;
    beast::flat_buffer buffer(options.max_request_bytes);  // its maximum size
    boost::system::error_code ec;
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.header_limit(options.max_request_bytes);
      parser.body_limit(options.max_request_bytes);
      stream_.expires_after(options.read_timeout);
      co_await http::async_read(stream_, buffer, parser,
                                asio::redirect_error(asio::use_awaitable, ec));
      if (closed_) co_return;
      Response response;
      if (ec) {
        const auto status = status_for_read_error(ec);
        if (!status) co_return;
        response = text_response(*status, 11, fmt::format("bad request: {}\n", ec.message()));
        response.keep_alive(false);
      } else {
        response = respond(*shared_, parser.get());
      }
      stream_.expires_after(options.read_timeout);
      co_await http::async_write(stream_, response, asio::redirect_error(asio::use_awaitable, ec));
      if (ec || closed_ || !response.keep_alive()) co_return;
    }
  }

  beast::tcp_stream stream_;
  std::shared_ptr<HttpEndpoint::Shared> shared_;
  const bool refuse_;
  std::function<void()> ended_;
  bool closed_ = false;
};

ListenerOptions listener_options(const HttpEndpointOptions& options) {
  ListenerOptions o;
  o.name = "metrics endpoint";
  o.backlog = options.backlog;
  o.max_connections = options.max_connections;
  o.refusal_slack = 4;  // room to answer a few refusals with a 503
  return o;
}

}  // namespace

HttpEndpoint::HttpEndpoint(asio::io_context& io, HttpEndpointOptions options,
                           MetricsHandler metrics, HealthHandler health)
    : options_(std::move(options)),
      shared_(std::make_shared<Shared>(Shared{options_, std::move(metrics), std::move(health)})),
      listener_(io, listener_options(options_)) {}

HttpEndpoint::~HttpEndpoint() { close(); }

Status HttpEndpoint::listen() {
  return listener_.listen(options_.address, options_.port, [this](Listener::Accepted a) {
    return std::make_shared<HttpConnection>(std::move(a.socket), shared_, a.refusal.has_value(),
                                            std::move(a.ended));
  });
}

void HttpEndpoint::close() { listener_.close(); }

size_t HttpEndpoint::connections() const { return listener_.connections(); }

}  // namespace ddprun::metrics
