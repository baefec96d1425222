// One process of the store load generator (bench/store/run_bench.py starts several: a process
// holds at most ~19,000 descriptors here). Its clients play the store traffic of torch's
// init_process_group (tests/store/init_traffic.h) against any TCPStore server. Prints one JSON
// line: how many were released, errors, and (wall clock) when the first connected and the last
// was released.
//
//   store_load PORT validated|legacy WORLD FIRST_RANK COUNT
#include <sys/resource.h>

#include <cstdio>
#include <string>

#include <boost/asio/io_context.hpp>

#include "tests/store/init_traffic.h"

int main(int argc, char** argv) {
  using namespace ddprun::store;
  if (argc != 6) {
    std::fprintf(stderr, "usage: store_load PORT validated|legacy WORLD FIRST_RANK COUNT\n");
    return 2;
  }
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);
  const auto port = static_cast<uint16_t>(std::stoi(argv[1]));
  const Dialect dialect = std::string(argv[2]) == "legacy" ? Dialect::kLegacy : Dialect::kValidated;
  boost::asio::io_context io(1);
  testing::InitTrafficResult result;
  testing::start_init_traffic(io, port, dialect, std::stoll(argv[3]), std::stoll(argv[4]),
                              std::stoi(argv[5]), result);
  io.run();
  std::printf(
      "{\"released\": %d, \"errors\": %d, \"first_error\": \"%s\", \"first_connect\": %.6f, "
      "\"last_release\": %.6f}\n",
      result.released, result.errors, result.first_error.c_str(), result.first_connect,
      result.last_release);
  return result.errors == 0 ? 0 : 1;
}
