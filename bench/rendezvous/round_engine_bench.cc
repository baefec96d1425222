// The round engine alone (issue 25): N simulated nodes join one N:N job of a JobRegistry (the
// job registry, its RoundState and the decisions it pushes), in this process, without sockets:
// each node is a Peer that counts what it is sent (a real Session encodes the same messages
// into frames; that cost is in rendezvous_load's figures). Reports the CPU time and the memory
// one round takes, and checks that every node was assigned a distinct group rank. Not a test:
// run by hand, see docs/benchmarks.md "The largest rounds".
//
//   round_engine_bench [nodes=100000] [rounds=3]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/io_context.hpp>

#include "rendezvous/server/job_registry.h"

namespace {

using namespace ddprun;
using namespace ddprun::rdzv;

// A node's connection that keeps what it is told.
class CountingPeer final : public Peer {
 public:
  void send(const ServerMessage& message) override {
    ++messages;
    if (const auto* assigned = std::get_if<RoundAssigned>(&message)) {
      group_rank = assigned->group_rank;
      world_size = assigned->world_size;
    }
  }
  void kick(const std::string&) override {}
  uint64_t messages = 0;
  int64_t group_rank = -1;
  uint32_t world_size = 0;
};

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

double rss_mib(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) == 0) return std::stod(line.substr(std::string(field).size())) / 1024;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int nodes = argc > 1 ? std::stoi(argv[1]) : 100'000;
  const int rounds = argc > 2 ? std::stoi(argv[2]) : 3;
  spdlog::set_level(spdlog::level::warn);
  int failures = 0;
  for (int round = 0; round < rounds; ++round) {
    boost::asio::io_context io;
    const double rss_before = rss_mib("VmRSS:");
    auto registry = std::make_unique<JobRegistry>(io.get_executor(), SystemClock::instance());
    std::vector<std::unique_ptr<CountingPeer>> peers;
    peers.reserve(nodes);
    for (int i = 0; i < nodes; ++i) peers.push_back(std::make_unique<CountingPeer>());
    const double cpu0 = cpu_seconds();
    const auto wall0 = std::chrono::steady_clock::now();
    JobRegistry::Job& job = registry->open_connection("engine-bench");
    for (int i = 0; i < nodes; ++i) {
      if (i > 0) registry->open_connection("engine-bench");
      JoinMsg join;
      join.request_id = 1;
      join.node.node_id = "node-" + std::to_string(i);
      join.node.local_world_size = 8;
      join.node.master_addr = "10.0.0.1";
      join.node.master_port = 29500;
      join.job.min_nodes = join.job.max_nodes = static_cast<uint32_t>(nodes);
      std::string node_id;
      registry->join(job, *peers[i], join, node_id);
    }
    io.poll();  // posted work, if any
    const double cpu = cpu_seconds() - cpu0;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    std::set<int64_t> ranks;
    uint64_t messages = 0;
    for (const auto& p : peers) {
      ranks.insert(p->group_rank);
      messages += p->messages;
      if (p->world_size != static_cast<uint32_t>(nodes) * 8) ++failures;
    }
    const bool right = ranks.size() == static_cast<size_t>(nodes) && *ranks.begin() == 0 &&
                       *ranks.rbegin() == nodes - 1;
    if (!right) ++failures;
    std::printf(
        "nodes=%d round=%d cpu=%.3fs wall=%.3fs messages=%llu rss_growth=%.1fMiB "
        "peak_rss=%.1fMiB ranks_distinct=%s\n",
        nodes, round, cpu, wall, static_cast<unsigned long long>(messages),
        rss_mib("VmRSS:") - rss_before, rss_mib("VmHWM:"), right ? "yes" : "NO");
    registry->cancel_timers();
  }
  return failures == 0 ? 0 : 1;
}
