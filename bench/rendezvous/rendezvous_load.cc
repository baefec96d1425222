// Load generator: N simulated nodes, each a real RendezvousClient with its own connection
// (source addresses spread over 127.0.0.1-250), join one round of an N:N job on a separate
// ddp-rendezvous process. Reports the time until every node has its assignment, and the
// server's CPU time and peak RSS (from /proc). Not a test: run by hand, see docs/benchmarks.md.
//
//   rendezvous_load [nodes=1000] [plain|token|tls] [straggler_sweeps=0]
//   DDPRUN_LOAD_DAEMON_ARGS="--state-dir DIR" rendezvous_load 1000   (state_latency.sh)
//
// straggler_sweeps > 0 (issue 23): once the round runs, every node shares its 8 ranks' progress
// with busy times (one rank of the job five times slower) and a 1.5x threshold, that many
// times; each share is answered with the job's stragglers, judged over every rank. Reports the
// time until a sweep's answers are all in, the server's CPU per share, and the time of one
// finding over that many ranks in this process (find_stragglers alone).
//
// token: the daemon has --token-file and every node the token (the challenge-response on every
// connection); tls: that plus TLS (a server certificate made with the openssl command, every
// node verifying it against the CA).
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/io_context.hpp>

#include "bench/rendezvous/daemon_process.h"
#include "progress/stragglers.h"
#include "rendezvous/client/client.h"
#include "rendezvous/conf/rdzv_conf.h"
#include "rendezvous/security/credentials.h"
#include "tests/rendezvous/test_pki.h"

namespace {

using namespace ddprun;
using namespace ddprun::rdzv;
using BenchClock = std::chrono::steady_clock;

// The daemon with `extra` flags, plus any in DDPRUN_LOAD_DAEMON_ARGS (the state store:
// --state-dir, --state etcd://...); a client per node needs no per-source limit.
bench::DaemonProcess spawn_server(std::vector<std::string> extra) {
  extra.insert(extra.begin(), {"--max-connections-per-source", "100000"});
  if (const char* more = std::getenv("DDPRUN_LOAD_DAEMON_ARGS")) {
    std::istringstream words(more);
    for (std::string w; words >> w;) extra.push_back(w);
  }
  return bench::spawn_daemon(DDP_RENDEZVOUS_BIN, extra);
}

// utime + stime in seconds, and VmHWM / VmRSS in MiB, of `pid`.
void server_usage(pid_t pid, double& cpu_s, double& hwm_mib, double& rss_mib) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(stat)), {});
  std::istringstream rest(s.substr(s.rfind(')') + 2));
  std::string field;
  unsigned long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoul(field);
    if (i == 15) stime = std::stoul(field);
  }
  cpu_s = static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) hwm_mib = std::stod(line.substr(6)) / 1024.0;
    if (line.rfind("VmRSS:", 0) == 0) rss_mib = std::stod(line.substr(6)) / 1024.0;
  }
}

double seconds_since(BenchClock::time_point t) {
  return std::chrono::duration<double>(BenchClock::now() - t).count();
}

constexpr uint32_t kRanksPerNode = 8;

// Node `node`'s ranks at `step`: 50 ms busy each, but global rank `slow` 250 ms.
std::vector<RankProgressEntry> node_ranks(int node, int64_t step, uint32_t slow) {
  std::vector<RankProgressEntry> ranks(kRanksPerNode);
  for (uint32_t l = 0; l < kRanksPerNode; ++l) {
    RankProgressEntry& r = ranks[l];
    r.rank = static_cast<uint32_t>(node) * kRanksPerNode + l;
    r.local_rank = l;
    r.step = step;
    r.heartbeat_seen = true;
    r.busy_us = r.rank == slow ? 250'000 : 50'000 + r.rank % 7 * 100;
  }
  return ranks;
}

// One finding over every rank, in this process: the server's work per share, without I/O.
double finding_microseconds(int nodes, uint32_t slow) {
  std::vector<std::vector<RankProgressEntry>> all;
  std::vector<std::string> hosts;
  for (int n = 0; n < nodes; ++n) {
    all.push_back(node_ranks(n, 1, slow));
    hosts.push_back("127.0.0." + std::to_string(1 + n % 250));
  }
  std::vector<progress::NodeRanks> view;
  for (int n = 0; n < nodes; ++n) view.push_back({hosts[n], all[n]});
  constexpr int kRepeats = 200;
  size_t named = 0;
  const auto t = BenchClock::now();
  for (int i = 0; i < kRepeats; ++i)
    named += progress::find_stragglers(view, 1500).stragglers.size();
  const double us = seconds_since(t) * 1e6 / kRepeats;
  if (named != kRepeats) std::fprintf(stderr, "find_stragglers named %zu, not 1 each\n", named);
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  const int nodes = argc > 1 ? std::stoi(argv[1]) : 1000;
  const std::string mode = argc > 2 ? argv[2] : "plain";
  const int straggler_sweeps = argc > 3 ? std::stoi(argv[3]) : 0;
  if (mode != "plain" && mode != "token" && mode != "tls") {
    std::fprintf(stderr, "mode must be plain, token or tls\n");
    return 2;
  }
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;  // one socket per simulated node
  ::setrlimit(RLIMIT_NOFILE, &lim);
  spdlog::set_level(spdlog::level::warn);

  // Credentials for both sides (token, and for tls a CA and a server certificate).
  ddprun::rdzv::testing::TestPki pki;
  std::vector<std::string> server_flags;
  RendezvousConf conf;
  if (mode != "plain") {
    const std::string token = pki.token("bench", "0123456789abcdef0123456789abcdef");
    server_flags = {"--token-file", token};
    conf.token_file = token;
  }
  if (mode == "tls") {
    server_flags.insert(server_flags.end(),
                        {"--tls-cert", pki.cert("server"), "--tls-key", pki.key("server")});
    conf.tls_ca_file = pki.cert("ca");
  }
  auto loaded = load_client_credentials(conf);
  if (!loaded) {
    std::fprintf(stderr, "%s\n", loaded.error_message().c_str());
    return 2;
  }
  const auto credentials = std::make_shared<const ClientCredentials>(std::move(*loaded));
  bench::DaemonProcess server = spawn_server(server_flags);
  double cpu_start = 0, hwm0 = 0, rss0 = 0;
  server_usage(server.pid, cpu_start, hwm0, rss0);
  boost::asio::io_context io;
  std::vector<std::unique_ptr<TcpRendezvousClient>> clients;
  int connected = 0, failed = 0, assigned = 0;
  const auto t_connect = BenchClock::now();
  for (int i = 0; i < nodes; ++i) {
    ClientOptions o;
    o.port = server.port;
    o.job_id = "bench-" + std::to_string(::getpid());  // a fresh job even in a kept state
    o.local_address = "127.0.0." + std::to_string(1 + i % 250);
    o.connect_timeout = std::chrono::seconds(60);
    o.heartbeat_timeout = std::chrono::seconds(60);
    o.keep_alive_interval = std::chrono::seconds(10);
    o.credentials = credentials;
    clients.push_back(std::make_unique<TcpRendezvousClient>(io, o));
    clients.back()->connect([&](Status s) { s.ok() ? ++connected : ++failed; });
  }
  while (connected + failed < nodes) io.run_one();
  const double connect_s = seconds_since(t_connect);
  if (failed) std::fprintf(stderr, "%d clients failed to connect\n", failed);

  double cpu_before = 0, hwm = 0, rss = 0;
  server_usage(server.pid, cpu_before, hwm, rss);
  const auto t_join = BenchClock::now();
  for (int i = 0; i < nodes; ++i) {
    JoinRequest r;
    r.node.node_id = "node-" + std::to_string(i);
    r.node.local_world_size = 8;
    r.node.master_addr = "127.0.0.1";
    r.node.master_port = 29500;
    r.job.min_nodes = r.job.max_nodes = static_cast<uint32_t>(nodes);
    r.job.heartbeat_timeout = std::chrono::seconds(60);
    clients[i]->join(r, [&](Result<RoundAssignment> a) {
      if (a.ok())
        ++assigned;
      else {
        ++failed;
        std::fprintf(stderr, "%s\n", a.error_message().c_str());
      }
    });
  }
  while (assigned + failed < nodes) io.run_one();
  const double join_s = seconds_since(t_join);
  double cpu_after = 0;
  server_usage(server.pid, cpu_after, hwm, rss);

  std::printf(
      "mode=%s nodes=%d connect_all=%.3fs server_cpu_during_connect=%.3fs "
      "join_to_all_assigned=%.3fs server_cpu_during_join=%.3fs server_cpu_total=%.3fs "
      "server_peak_rss=%.1fMiB server_rss=%.1fMiB failed=%d\n",
      mode.c_str(), nodes, connect_s, cpu_before - cpu_start, join_s, cpu_after - cpu_before,
      cpu_after, hwm, rss, failed);

  if (straggler_sweeps > 0 && failed == 0) {
    const uint32_t slow = static_cast<uint32_t>(nodes) * kRanksPerNode / 2 + 3;
    double slowest_sweep = 0, total_sweeps = 0;
    int wrong = 0;
    double cpu0 = 0;
    server_usage(server.pid, cpu0, hwm, rss);
    for (int sweep = 1; sweep <= straggler_sweeps; ++sweep) {
      int answered = 0;
      const auto t_sweep = BenchClock::now();
      for (int i = 0; i < nodes; ++i) {
        clients[i]->share_progress(node_ranks(i, sweep, slow), 1500,
                                   [&](Result<StragglerFinding> f) {
                                     ++answered;
                                     if (!f.ok()) ++wrong;
                                   });
      }
      while (answered < nodes) io.run_one();
      const double s = seconds_since(t_sweep);
      slowest_sweep = std::max(slowest_sweep, s);
      total_sweeps += s;
    }
    // A last share, to check what the job's finding says once every node has shared.
    std::optional<StragglerFinding> last;
    clients[0]->share_progress(
        node_ranks(0, straggler_sweeps + 1, slow), 1500,
        [&](Result<StragglerFinding> f) { last = f.ok() ? *f : StragglerFinding{}; });
    while (!last) io.run_one();
    double cpu1 = 0;
    server_usage(server.pid, cpu1, hwm, rss);
    const bool right = last->stragglers.size() == 1 && last->stragglers[0].rank == slow &&
                       last->ranks_measured == static_cast<uint32_t>(nodes) * kRanksPerNode;
    std::printf(
        "stragglers: ranks=%u sweeps=%d (one share per node each) mean_sweep=%.3fs "
        "slowest_sweep=%.3fs server_cpu_per_share=%.1fus finding_in_process=%.1fus "
        "slow_rank_named=%s failed_shares=%d\n",
        static_cast<uint32_t>(nodes) * kRanksPerNode, straggler_sweeps,
        total_sweeps / straggler_sweeps, slowest_sweep,
        (cpu1 - cpu0) * 1e6 / (static_cast<double>(nodes) * straggler_sweeps + 1),
        finding_microseconds(nodes, slow), right ? "yes" : "NO", wrong);
    if (!right || wrong) failed = 1;
  }
  clients.clear();
  server.end();
  return failed == 0 ? 0 : 1;
}
