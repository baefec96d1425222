#include "tests/store/init_traffic.h"

#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "store/codec.h"

namespace ddprun::store::testing {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

struct Run {
  Dialect dialect = Dialect::kValidated;
  int64_t world = 0;
  InitTrafficResult* out = nullptr;
};

double now_unix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

asio::awaitable<void> send(tcp::socket& s, const Request& r, Dialect d) {
  const std::string bytes = encode_request(r, d);
  co_await asio::async_write(s, asio::buffer(bytes), asio::use_awaitable);
}

// Reads `size` bytes of a fixed-size reply (integers are little-endian, as torch writes them).
asio::awaitable<uint64_t> read_le(tcp::socket& s, size_t size) {
  std::string bytes(size, '\0');
  co_await asio::async_read(s, asio::buffer(bytes), asio::use_awaitable);
  uint64_t value = 0;
  for (size_t i = size; i-- > 0;) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  co_return value;
}

// (Requests are built before each co_await: GCC 12 miscompiles braced temporaries inside one.)
asio::awaitable<int64_t> add(tcp::socket& s, const std::string& key, Dialect d) {
  const Request r = make(Op::kAdd, std::vector<std::string>{key}, {}, 1);
  co_await send(s, r, d);
  co_return static_cast<int64_t>(co_await read_le(s, 8));
}

asio::awaitable<void> wait_for(tcp::socket& s, const std::string& key, Dialect d) {
  const Request r = make(Op::kWait, std::vector<std::string>{key});
  co_await send(s, r, d);
  co_await read_le(s, 1);  // STOP_WAITING
}

asio::awaitable<void> client(tcp::socket s, tcp::endpoint server, int64_t rank, Run run) {
  try {
    co_await s.async_connect(server, asio::use_awaitable);
    s.set_option(tcp::no_delay(true));
    if (run.out->first_connect == 0) run.out->first_connect = now_unix();
    const Dialect d = run.dialect;
    if (d == Dialect::kValidated) {
      Request validate;
      validate.op = Op::kValidate;
      validate.number = kValidationMagic;
      co_await send(s, validate, d);
      Request ping;
      ping.op = Op::kPing;
      ping.number = static_cast<uint32_t>(rank);
      co_await send(s, ping, d);
      if (co_await read_le(s, 4) != static_cast<uint32_t>(rank)) {
        throw std::runtime_error("PING answered with another nonce");
      }
    }
    const Request own = make(Op::kSet, std::vector<std::string>{"rank/" + std::to_string(rank)},
                             std::vector<std::string>{"127.0.0.1:29500"});
    const Request init_done =
        make(Op::kSet, std::vector<std::string>{"init/done"}, std::vector<std::string>{"1"});
    const Request get_done = make(Op::kGet, std::vector<std::string>{"init/done"});
    const Request final_done =
        make(Op::kSet, std::vector<std::string>{"final/done"}, std::vector<std::string>{"1"});
    co_await send(s, own, d);
    if (co_await add(s, "init/count", d) == run.world) co_await send(s, init_done, d);
    co_await wait_for(s, "init/done", d);
    co_await send(s, get_done, d);
    const uint64_t length = co_await read_le(s, 8);
    std::string value(length, '\0');
    co_await asio::async_read(s, asio::buffer(value), asio::use_awaitable);
    if (value != "1") throw std::runtime_error("init/done holds '" + value + "'");
    if (co_await add(s, "final/count", d) == run.world) co_await send(s, final_done, d);
    co_await wait_for(s, "final/done", d);
    ++run.out->released;
    run.out->last_release = now_unix();
  } catch (const std::exception& e) {
    if (run.out->errors++ == 0) run.out->first_error = e.what();
  }
}

}  // namespace

Request make(Op op, std::vector<std::string> keys, std::vector<std::string> values, int64_t delta) {
  Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.values = std::move(values);
  r.delta = delta;
  return r;
}

void start_init_traffic(asio::io_context& io, uint16_t port, Dialect dialect, int64_t world,
                        int64_t first, int count, InitTrafficResult& result) {
  const tcp::endpoint server(asio::ip::make_address_v4("127.0.0.1"), port);
  for (int i = 0; i < count; ++i) {
    const int64_t rank = first + i;
    tcp::socket s(io);
    s.open(tcp::v4());
    s.bind(
        tcp::endpoint(asio::ip::make_address_v4("127.0.0." + std::to_string(1 + rank % 250)), 0));
    asio::co_spawn(io, client(std::move(s), server, rank, Run{dialect, world, &result}),
                   asio::detached);
  }
}

}  // namespace ddprun::store::testing
