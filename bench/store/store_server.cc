// ddprun's job store (store/server.h) as a process of its own, for bench/store/run_bench.py:
// listens on 127.0.0.1 (port 0), prints its port on stdout, and serves until stdin closes.
//
//   store_server
#include <unistd.h>

#include <cstdio>
#include <thread>

#include <spdlog/spdlog.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "common/descriptor_limit.h"
#include "store/server.h"

int main() {
  using namespace ddprun;
  spdlog::set_level(spdlog::level::warn);
  raise_descriptor_limit(1u << 20);
  boost::asio::io_context io(1);
  store::StoreServer server(io, store::StoreServerOptions{});
  if (Status s = server.listen("127.0.0.1", 0); !s) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  std::printf("%u\n", server.port());
  std::fflush(stdout);
  // Ends when the benchmark closes our stdin.
  boost::asio::posix::stream_descriptor in(io, ::dup(STDIN_FILENO));
  char byte;
  in.async_read_some(boost::asio::buffer(&byte, 1),
                     [&](const boost::system::error_code&, size_t) { io.stop(); });
  io.run();
  return 0;
}
