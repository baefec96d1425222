// Load generator: N simulated nodes, each a real RendezvousClient with its own connection
// (source addresses spread over 127.0.0.1-250), join one round of an N:N job on a separate
// ddp-rendezvous process. Reports the time until every node has its assignment, and the
// server's CPU time and peak RSS (from /proc). Not a test: run by hand, see docs/benchmarks.md.
//
//   rendezvous_load [nodes=1000] [plain|token|tls]
//   DDPRUN_LOAD_DAEMON_ARGS="--state-dir DIR" rendezvous_load 1000   (state_latency.sh)
//
// token: the daemon has --token-file and every node the token (the challenge-response on every
// connection); tls: that plus TLS (a server certificate made with the openssl command, every
// node verifying it against the CA).
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/io_context.hpp>

#include "bench/rendezvous/daemon_process.h"
#include "rendezvous/client.h"
#include "rendezvous/rdzv_conf.h"
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

}  // namespace

int main(int argc, char** argv) {
  const int nodes = argc > 1 ? std::stoi(argv[1]) : 1000;
  const std::string mode = argc > 2 ? argv[2] : "plain";
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
  clients.clear();
  server.end();
  return failed == 0 ? 0 : 1;
}
