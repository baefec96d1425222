// A child process for the state tests, so that they can kill a real process mid-work:
//
//   state_test_helper sqlite-writer DIR
//     Saves job "job-<seq % 7>" = "<seq>" for seq = 1, 2, ... with 4 saves in flight, and prints
//     "acked <seq>" once each save has completed. Runs until killed.
//   state_test_helper contend ENDPOINTS CLUSTER ADDRESS TTL_MS POLL_MS
//     Campaigns for leadership in etcd; prints "elected <revision>", "lost <why>" and
//     "leader <address>" / "leader none". Resigns and exits 0 when stdin closes.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read.hpp>

#include "rendezvous/state/etcd/etcd_client.h"
#include "rendezvous/state/etcd/etcd_leadership.h"
#include "rendezvous/state/sqlite/sqlite_state_store.h"

namespace {

using namespace ddprun;
using namespace ddprun::rdzv::state;

void say(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

int sqlite_writer(const std::string& dir) {
  boost::asio::io_context io;
  auto store = SqliteStateStore::open(io, {.directory = dir});
  if (!store) {
    say("error " + store.error_message());
    return 1;
  }
  uint64_t next = 1;
  std::function<void()> save_next = [&] {
    const uint64_t seq = next++;
    (*store)->save("job-" + std::to_string(seq % 7), std::to_string(seq), [&, seq](Status s) {
      if (!s) {
        say("error " + s.message());
        io.stop();
        return;
      }
      say("acked " + std::to_string(seq));
      save_next();
    });
  };
  for (int i = 0; i < 4; ++i) save_next();
  say("ready");
  io.run();
  return 1;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t comma; (comma = s.find(',', start)) != std::string::npos; start = comma + 1) {
    out.push_back(s.substr(start, comma - start));
  }
  out.push_back(s.substr(start));
  return out;
}

int contend(char** argv) {
  boost::asio::io_context io;
  auto client = std::make_shared<EtcdClient>(
      io, EtcdClientOptions{.endpoints = split(argv[0]), .request_timeout = Millis(500)});
  EtcdLeadershipOptions options;
  options.cluster = argv[1];
  options.advertised_address = argv[2];
  options.ttl = Millis(std::stol(argv[3]));
  options.poll_interval = Millis(std::stol(argv[4]));
  EtcdLeadership::Handlers handlers;
  handlers.elected = [](const LeaderTerm&, const LeaderFence& fence) {
    say("elected " + std::to_string(fence.create_revision));
  };
  handlers.lost = [](const Status& why) { say("lost " + why.message()); };
  handlers.leader_changed = [](const std::optional<std::string>& leader) {
    say("leader " + leader.value_or("none"));
  };
  EtcdLeadership leadership(client, options, handlers);
  leadership.start();
  // stdin's EOF (the test closed it) asks for a clean resignation.
  boost::asio::posix::stream_descriptor in(io, ::dup(STDIN_FILENO));
  char byte;
  boost::asio::async_read(in, boost::asio::buffer(&byte, 1),
                          [&](const boost::system::error_code&, size_t) {
                            leadership.resign([&](Status s) {
                              say(s ? "resigned" : "resign failed " + s.message());
                              io.stop();
                            });
                          });
  io.run();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "sqlite-writer") == 0) return sqlite_writer(argv[2]);
  if (argc == 7 && std::strcmp(argv[1], "contend") == 0) return contend(argv + 2);
  std::fprintf(stderr, "usage: see the comment at the top of state_test_helper.cc\n");
  return 2;
}
