// Failover of ddp-rendezvous replicas: two replicas share their state in etcd, N simulated
// nodes (real RendezvousClients given both addresses, one io_context thread) join one N:N job,
// then the leading replica is killed (SIGKILL). Reports the time from the kill until the first
// and until every node has resumed its membership on the new leader: each node asks for the
// job's progress right after the kill; while its client reconnects the request waits behind
// the resume, so its answer means "resumed". Not a test: run by hand with an etcd cluster
// (bench/rendezvous/failover.sh starts one), see docs/benchmarks.md.
//
//   failover_bench etcd://h1:p,h2:p,h3:p [nodes=100] [lease_ttl_s=2] [reps=3]
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "bench/rendezvous/daemon_process.h"
#include "rendezvous/client/client.h"

namespace {

using namespace ddprun;
using namespace ddprun::rdzv;
using BenchClock = std::chrono::steady_clock;

using Replica = bench::DaemonProcess;

// Starts a replica on a free port with the shared state and lease TTL.
Replica spawn_replica(const std::string& state, const std::string& ttl) {
  return bench::spawn_daemon(DDP_RENDEZVOUS_BIN, {"--state", state, "--lease-ttl", ttl});
}

ClientOptions options(const Replica& first, const Replica* second, int i) {
  ClientOptions o;
  o.port = first.port;
  if (second) o.more_servers = {{"127.0.0.1", second->port}};
  o.job_id = "failover";
  o.local_address = "127.0.0." + std::to_string(1 + i % 250);
  o.connect_timeout = std::chrono::seconds(30);
  o.heartbeat_timeout = std::chrono::seconds(30);  // the reconnect window
  o.keep_alive_interval = std::chrono::seconds(1);
  return o;
}

// Waits until `replica` leads: only the leader completes a handshake.
bool wait_leading(const Replica& replica) {
  boost::asio::io_context io;
  TcpRendezvousClient probe(io, options(replica, nullptr, 0));
  std::optional<Status> connected;
  probe.connect([&](Status s) { connected = s; });
  while (!connected) io.run_one();
  probe.close();
  io.run_for(std::chrono::milliseconds(200));
  return connected->ok();
}

double ms_since(BenchClock::time_point t, BenchClock::time_point now) {
  return std::chrono::duration<double, std::milli>(now - t).count();
}

// One repetition: returns {kill → first resumed, kill → all resumed} in ms, or {-1, -1}.
std::pair<double, double> run_once(const std::string& state, const std::string& ttl, int nodes) {
  Replica a = spawn_replica(state, ttl);
  if (!wait_leading(a)) {
    std::fprintf(stderr, "the first replica did not lead within 30 s\n");
    return {-1, -1};
  }
  Replica b = spawn_replica(state, ttl);
  boost::asio::io_context io;
  std::vector<std::unique_ptr<TcpRendezvousClient>> clients;
  int connected = 0, assigned = 0, failed = 0;
  for (int i = 0; i < nodes; ++i) {
    clients.push_back(std::make_unique<TcpRendezvousClient>(io, options(a, &b, i)));
    clients.back()->set_event_handler([&](const RendezvousEvent& e) {
      if (std::holds_alternative<ConnectionLost>(e)) ++failed;
    });
    clients.back()->connect([&](Status s) { s ? ++connected : ++failed; });
  }
  while (connected + failed < nodes) io.run_one();
  for (int i = 0; i < nodes && failed == 0; ++i) {
    JoinRequest r;
    r.node.node_id = "node-" + std::to_string(i);
    r.node.local_world_size = 8;
    r.node.master_addr = "127.0.0.1";
    r.node.master_port = 29500;
    r.job.min_nodes = r.job.max_nodes = static_cast<uint32_t>(nodes);
    r.job.heartbeat_timeout = std::chrono::seconds(30);
    clients[i]->join(r, [&](Result<RoundAssignment> got) { got ? ++assigned : ++failed; });
  }
  while (assigned + failed < nodes) io.run_one();
  if (failed) {
    std::fprintf(stderr, "%d of %d nodes could not join\n", failed, nodes);
    return {-1, -1};
  }

  std::vector<std::optional<BenchClock::time_point>> resumed(nodes);
  int done = 0;
  std::function<void(int)> ask = [&](int i) {
    clients[i]->job_progress([&, i](Result<std::vector<NodeProgress>> p) {
      if (p) {
        resumed[i] = BenchClock::now();
        ++done;
      } else if (failed == 0) {  // sent on the dying connection: ask again
        boost::asio::post(io, [&, i] { ask(i); });
      }
    });
  };
  const auto killed = BenchClock::now();
  a.end();
  for (int i = 0; i < nodes; ++i) ask(i);
  while (done < nodes && failed == 0) io.run_one();
  clients.clear();
  io.run_for(std::chrono::milliseconds(100));
  if (failed) return {-1, -1};
  auto first = *std::min_element(resumed.begin(), resumed.end());
  auto last = *std::max_element(resumed.begin(), resumed.end());
  return {ms_since(killed, *first), ms_since(killed, *last)};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: failover_bench etcd://h:p,... [nodes] [lease_ttl_s] [reps]\n");
    return 2;
  }
  const std::string etcd = argv[1];
  const int nodes = argc > 2 ? std::stoi(argv[2]) : 100;
  const std::string ttl = argc > 3 ? argv[3] : "2";
  const int reps = argc > 4 ? std::stoi(argv[4]) : 3;
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;  // one socket per simulated node
  ::setrlimit(RLIMIT_NOFILE, &lim);
  spdlog::set_level(spdlog::level::err);
  int bad = 0;
  for (int rep = 0; rep < reps; ++rep) {
    // A cluster name per repetition: no leader key left over from the last one.
    const std::string state =
        etcd + "/failover-" + std::to_string(::getpid()) + "-" + std::to_string(rep);
    auto [first, all] = run_once(state, ttl, nodes);
    if (first < 0) ++bad;
    std::printf(
        "rep=%d nodes=%d lease_ttl=%ss kill_to_first_resumed=%.0fms "
        "kill_to_all_resumed=%.0fms%s\n",
        rep, nodes, ttl.c_str(), first, all, first < 0 ? " FAILED" : "");
    std::fflush(stdout);
  }
  return bad == 0 ? 0 : 1;
}
