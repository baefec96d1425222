// Metrics, health and status of real processes: a ddp-rendezvous daemon and two ddprun agents
// (127.0.0.1 and 127.0.0.2) running one job, each with its metrics endpoint on a free port.
//   - promtool (Debian's prometheus package) accepts what both kinds of endpoint serve;
//   - `ddp-rendezvous status` shows the running job through the protocol, and fails clearly
//     when the daemon is gone;
//   - with --hang_timeout, each rank's last step and heartbeat age from its real heartbeats;
//   - a real Prometheus server scrapes both agents and records the group-restart counter going
//     up after a worker failure.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "tests/metrics/http_client.h"
#include "tests/multinode/multinode_fixture.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kFailingRank = 3;  // node 2's second worker
constexpr int kExitCode = 3;

// The port in "serving metrics on http://<addr>:<port>/metrics", once `child` has logged it.
uint16_t metrics_port(ChildProcess& child, const std::string& addr) {
  const std::string prefix = "serving metrics on http://" + addr + ":";
  if (!child.wait_for_stderr(prefix, deadline_after(20s))) {
    ADD_FAILURE() << "no metrics endpoint announced; stderr:\n" << child.stderr_text();
    return 0;
  }
  const std::string err = child.stderr_text();
  return static_cast<uint16_t>(std::stoi(err.substr(err.find(prefix) + prefix.size())));
}

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

class MetricsTest : public MultinodeTest {
 protected:
  void TearDown() override {
    if (daemon_) {
      daemon_->send_signal(SIGTERM);
      EXPECT_TRUE(ExitedWith(finish(*daemon_, deadline_after(10s)), 0));
      daemon_.reset();
    }
    MultinodeTest::TearDown();
  }

  // ddp-rendezvous on 127.0.0.1:0 with its metrics endpoint on a free port.
  void start_daemon_with_metrics() {
    ChildOptions options;
    options.executable = daemon_binary();
    options.args = {"--host", "127.0.0.1", "--port", "0", "--metrics-port", "0"};
    options.env = env_;
    options.cwd = temp().path();
    auto child = ChildProcess::start(options);
    ASSERT_TRUE(child.ok()) << child.error_message();
    daemon_ = std::move(child.value());
    const std::string prefix = "listening on 127.0.0.1:";
    ASSERT_TRUE(daemon_->wait_for_stdout("\n", deadline_after(10s))) << daemon_->stderr_text();
    const std::string line = daemon_->stdout_text();
    ASSERT_EQ(line.rfind(prefix, 0), 0u) << line;
    endpoint_ = "127.0.0.1:" + line.substr(prefix.size(), line.find('\n') - prefix.size());
    daemon_metrics_ = metrics_port(*daemon_, "127.0.0.1");
  }

  // Node n (2 workers) of job `job` at the daemon, with its metrics on 127.0.0.n.
  NodeSpec node(int n, std::vector<std::string> entry, std::vector<std::string> extra = {}) {
    NodeSpec spec;
    spec.node = n;
    spec.nnodes = "2";
    spec.endpoint = endpoint_;
    spec.job = "metrics-job";
    spec.extra = {"--metrics_port", "0", "--metrics_addr", node_addr(n)};
    spec.extra.insert(spec.extra.end(), extra.begin(), extra.end());
    spec.entry = std::move(entry);
    return spec;
  }

  // Runs `promtool check metrics` on the body of http://<addr>:<port>/metrics.
  void expect_promtool_accepts(const std::string& addr, uint16_t port) {
    auto scrape = http_get(addr, port, "/metrics");
    ASSERT_TRUE(scrape.ok()) << scrape.error_message();
    ASSERT_EQ(scrape->status, 200);
    EXPECT_EQ(scrape->content_type, "text/plain; version=0.0.4; charset=utf-8");
    const std::string file = out("scrape_" + addr + "_" + std::to_string(port) + ".txt");
    write_text_file(file, scrape->body);
    EXPECT_TRUE(promtool("check metrics < '" + file + "'"))
        << "scrape of " << addr << ":" << port << ":\n"
        << scrape->body;
    scrapes_ += scrape->body;
  }

  // configs/grafana/ddprun.json: every query is valid PromQL (promtool checks them as
  // recording rules, with Grafana's variables filled in) and names only series that the
  // endpoints scraped so far serve.
  void expect_dashboard_matches_the_scrapes() {
    const auto dashboard = nlohmann::json::parse(
        read_text_file(std::string(DDPRUN_SOURCE_DIR) + "/configs/grafana/ddprun.json"), nullptr,
        false);
    ASSERT_FALSE(dashboard.is_discarded()) << "configs/grafana/ddprun.json is not JSON";
    std::string rules = "groups:\n  - name: dashboard\n    rules:\n";
    const std::regex metric_name(R"(\b(ddprun_[a-z_]+|process_[a-z_]+)\b)");
    int queries = 0;
    for (const auto& panel : dashboard["panels"]) {
      for (const auto& target : panel.value("targets", nlohmann::json::array())) {
        std::string expr = target["expr"].get<std::string>();
        expr = std::regex_replace(expr, std::regex(R"(\$__rate_interval)"), "1m");
        expr = std::regex_replace(expr, std::regex(R"(\$job_id)"), ".*");
        rules += "      - record: dashboard_query_" + std::to_string(++queries) +
                 "\n        expr: '" + std::regex_replace(expr, std::regex("'"), "''") + "'\n";
        for (std::sregex_iterator m(expr.begin(), expr.end(), metric_name), end; m != end; ++m) {
          const std::string name = (*m)[1].str();  // a sample, or a family without any yet
          EXPECT_TRUE(contains(scrapes_, "\n" + name) || contains(scrapes_, "# TYPE " + name + " "))
              << panel["title"] << " queries " << (*m)[1] << ", which no endpoint serves";
        }
      }
    }
    EXPECT_GE(queries, 20);
    write_text_file(out("dashboard_rules.yml"), rules);
    EXPECT_TRUE(promtool("check rules '" + out("dashboard_rules.yml") + "'")) << rules;
  }

  std::string scrapes_;  // every /metrics body expect_promtool_accepts() read

  // Runs promtool on `args` (a shell command line after "promtool"); true when it exits 0.
  ::testing::AssertionResult promtool(const std::string& args) {
    if (std::string(DDPRUN_PROMTOOL).empty()) {
      return ::testing::AssertionFailure()
             << "promtool not found: install Debian's prometheus package (scripts/setup.sh)";
    }
    ChildOptions options;
    options.executable = "/bin/sh";
    options.args = {"-c", std::string(DDPRUN_PROMTOOL) + " " + args};
    options.env = env_;
    auto child = ChildProcess::start(options);
    if (!child) return ::testing::AssertionFailure() << child.error_message();
    return ExitedWith(finish(**child, deadline_after(30s)), 0);
  }

  std::unique_ptr<ChildProcess> daemon_;
  std::string endpoint_;
  uint16_t daemon_metrics_ = 0;
};

TEST_F(MetricsTest, PromtoolAcceptsTheMetricsOfTheDaemonAndOfBothAgents) {
  ASSERT_NO_FATAL_FAILURE(start_daemon_with_metrics());
  const std::string fifo = out("release.fifo");
  make_fifo(fifo);
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int n : {1, 2}) {
    nodes.push_back(start_node(node(n, {mn_worker("hold.py"), "--release", fifo})));
    ASSERT_NE(nodes.back(), nullptr);
  }
  ASSERT_TRUE(wait_for_markers("run_n", 4, deadline_after(40s)));
  for (int n : {1, 2}) {
    const uint16_t port = metrics_port(*nodes[n - 1], node_addr(n));
    ASSERT_NE(port, 0);
    expect_promtool_accepts(node_addr(n), port);
    auto health = http_get(node_addr(n), port, "/healthz");
    ASSERT_TRUE(health.ok()) << health.error_message();
    EXPECT_EQ(health->status, 200) << health->body;
    auto scrape = http_get(node_addr(n), port, "/metrics");
    ASSERT_TRUE(scrape.ok());
    EXPECT_TRUE(
        contains(scrape->body, "ddprun_agent_state{job_id=\"metrics-job\",state=\"running\"} 1\n"))
        << scrape->body;
    EXPECT_TRUE(contains(scrape->body, "ddprun_agent_world_size{job_id=\"metrics-job\"} 4\n"));
    EXPECT_TRUE(contains(scrape->body, "process_resident_memory_bytes "));
  }
  // Python workers report their progress by themselves (docs/progress.md): their ranks have
  // series even without --hang_timeout.
  EXPECT_TRUE(contains(scrapes_, "ddprun_worker_")) << scrapes_;
  expect_promtool_accepts("127.0.0.1", daemon_metrics_);
  expect_dashboard_matches_the_scrapes();
  auto daemon_scrape = http_get("127.0.0.1", daemon_metrics_, "/metrics");
  ASSERT_TRUE(daemon_scrape.ok());
  EXPECT_TRUE(contains(daemon_scrape->body, "ddprun_rendezvous_connections 2\n"))
      << daemon_scrape->body;
  EXPECT_TRUE(contains(daemon_scrape->body,
                       "ddprun_rendezvous_job_nodes{job_id=\"metrics-job\",state=\"member\"} 2\n"));
  auto daemon_health = http_get("127.0.0.1", daemon_metrics_, "/healthz");
  ASSERT_TRUE(daemon_health.ok());
  EXPECT_EQ(daemon_health->status, 200);

  release("release.fifo", 4);
  for (const RunResult& run : finish_all(nodes, deadline_after(30s))) {
    EXPECT_TRUE(ExitedWith(run, 0));
  }
}

// With hang detection on, each rank's last step and heartbeat age, from the heartbeats of real
// workers: rank r reports step 100 + r; one node's local ranks are global ranks 0 and 1, the
// other's 2 and 3 (which is which is the rendezvous's choice).
TEST_F(MetricsTest, WorkerSeriesShowEachRanksLastStepAndHeartbeatAge) {
  ASSERT_NO_FATAL_FAILURE(start_daemon_with_metrics());
  const std::string fifo = out("release.fifo");
  make_fifo(fifo);
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int n : {1, 2}) {
    // A long timeout: the workers hold still after their one heartbeat and must not be hung.
    nodes.push_back(start_node(node(n, {mn_worker("hold.py"), "--beat", "100", "--release", fifo},
                                    {"--hang_timeout", "60"})));
    ASSERT_NE(nodes.back(), nullptr);
  }
  ASSERT_TRUE(wait_for_markers("run_n", 4, deadline_after(40s)));
  std::set<int> firsts;  // each node's first global rank
  for (int n : {1, 2}) {
    const uint16_t port = metrics_port(*nodes[n - 1], node_addr(n));
    ASSERT_NE(port, 0);
    // The heartbeats are written before the markers, but reach the agent through inotify on its
    // own loop: scrape until both ranks' steps are there (bounded).
    int first = -1;  // this node's local rank 0's global rank, read from the series
    auto series = [&](const char* name, int local_rank) {
      return std::string(name) + "{job_id=\"metrics-job\",local_rank=\"" +
             std::to_string(local_rank) + "\",rank=\"" + std::to_string(first + local_rank) +
             "\"} ";
    };
    const std::string rank0 =
        "ddprun_worker_last_step{job_id=\"metrics-job\",local_rank=\"0\",rank=\"";
    std::string body;
    const Deadline deadline = deadline_after(20s);
    while (TestClock::now() < deadline) {
      auto scrape = http_get(node_addr(n), port, "/metrics");
      ASSERT_TRUE(scrape.ok()) << scrape.error_message();
      body = scrape->body;
      if (const size_t at = body.find(rank0); at != std::string::npos) {
        first = std::atoi(body.c_str() + at + rank0.size());
      }
      if (first >= 0 &&
          contains(body, series("ddprun_worker_last_step", 0) + std::to_string(100 + first)) &&
          contains(body, series("ddprun_worker_last_step", 1) + std::to_string(101 + first))) {
        break;
      }
      std::this_thread::sleep_for(50ms);  // between scrapes of a value that arrives on its own
    }
    ASSERT_TRUE(first == 0 || first == 2) << body;
    firsts.insert(first);
    ASSERT_TRUE(contains(body, series("ddprun_worker_last_step", 1) + std::to_string(101 + first)))
        << body;
    for (int local_rank : {0, 1}) {
      const std::string age = series("ddprun_worker_heartbeat_age_seconds", local_rank);
      const size_t at = body.find(age);
      ASSERT_NE(at, std::string::npos) << body;
      const double seconds = std::stod(body.substr(at + age.size()));
      EXPECT_GE(seconds, 0.0) << body;
      EXPECT_LT(seconds, 60.0) << "older than --hang_timeout, yet not hung: " << body;
    }
    expect_promtool_accepts(node_addr(n), port);
  }
  EXPECT_EQ(firsts, (std::set<int>{0, 2})) << "the two nodes hold different ranks";
  release("release.fifo", 4);
  for (const RunResult& run : finish_all(nodes, deadline_after(30s))) {
    EXPECT_TRUE(ExitedWith(run, 0)) << run.err;
  }
}

// Waits for a child that is not ddprun (promtool, Prometheus, the status command).
RunResult finish_child(ChildProcess& child, Deadline deadline) {
  RunResult run;
  run.pid = child.pid();
  run.exit = child.wait(deadline);
  run.out = child.stdout_text();
  run.err = child.stderr_text();
  return run;
}

// `ddp-rendezvous status` as a user runs it: a separate process.
RunResult run_status(const std::map<std::string, std::string>& env,
                     const std::vector<std::string>& args) {
  ChildOptions options;
  options.executable = DDP_RENDEZVOUS_BINARY;
  options.args = {"status"};
  options.args.insert(options.args.end(), args.begin(), args.end());
  options.env = env;
  auto child = ChildProcess::start(options);
  if (!child) {
    ADD_FAILURE() << child.error_message();
    return {};
  }
  return finish_child(**child, deadline_after(20s));
}

TEST_F(MetricsTest, StatusCommandShowsTheRunningJobAndFailsClearlyWithoutADaemon) {
  ASSERT_NO_FATAL_FAILURE(start_daemon_with_metrics());
  const std::string fifo = out("release.fifo");
  make_fifo(fifo);
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int n : {1, 2}) {
    nodes.push_back(
        start_node(node(n, {mn_worker("hold.py"), "--release", fifo}, {"--max_restarts", "2"})));
    ASSERT_NE(nodes.back(), nullptr);
  }
  ASSERT_TRUE(wait_for_markers("run_n", 4, deadline_after(40s)));

  const RunResult table = run_status(env_, {"--endpoint", endpoint_});
  ASSERT_TRUE(ExitedWith(table, 0));
  EXPECT_TRUE(std::regex_search(table.out, std::regex(R"(metrics-job +running +0 +0/2 +2 +2 +2)")))
      << table.out;
  for (int n : {1, 2}) {  // each node's connection comes from its own address
    EXPECT_TRUE(std::regex_search(
        table.out, std::regex(node_addr(n) + R"(:\d+ +[01] member +2 [0-9.]+s ago)")))
        << table.out;
  }
  const RunResult json = run_status(env_, {"--endpoint", endpoint_, "--json"});
  ASSERT_TRUE(ExitedWith(json, 0));
  // Not const: operator[] on a missing key then gives null (a clean failure), not undefined.
  auto report = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << json.out;
  ASSERT_EQ(report["jobs"].size(), 1u) << json.out;
  auto& job = report["jobs"][0];
  EXPECT_EQ(job["job_id"], "metrics-job");
  EXPECT_EQ(job["state"], "running");
  EXPECT_EQ(job["max_restarts"], 2);
  ASSERT_EQ(job["nodes"].size(), 2u);
  std::set<int> ranks;
  for (const auto& n : job["nodes"]) {
    ranks.insert(n["group_rank"].get<int>());
    EXPECT_EQ(n["state"], "member");
    EXPECT_GE(n["last_heartbeat_age_seconds"].get<double>(), 0.0);
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1}));

  release("release.fifo", 4);
  for (const RunResult& run : finish_all(nodes, deadline_after(30s))) {
    EXPECT_TRUE(ExitedWith(run, 0));
  }
  daemon_->send_signal(SIGTERM);
  EXPECT_TRUE(ExitedWith(finish(*daemon_, deadline_after(10s)), 0));
  daemon_.reset();
  const RunResult gone = run_status(env_, {"--endpoint", endpoint_});
  ASSERT_TRUE(ExitedWith(gone, 1));
  EXPECT_TRUE(contains(gone.err, "rendezvous server " + endpoint_)) << gone.err;
  EXPECT_TRUE(contains(gone.err, "cannot connect")) << gone.err;
}

// A real Prometheus server (Debian's binary) with its config and TSDB in the test's temp dir,
// listening on 127.0.0.1 on a free port; stopped with SIGTERM (its group SIGKILLed by the
// ChildProcess if the test fails first).
class PrometheusServer {
 public:
  static std::unique_ptr<PrometheusServer> start(const std::string& dir,
                                                 const std::vector<std::string>& targets,
                                                 const std::map<std::string, std::string>& env) {
    auto server = std::unique_ptr<PrometheusServer>(new PrometheusServer);
    server->port_ = free_port("127.0.0.1");
    std::string config =
        "global:\n  scrape_interval: 250ms\n  scrape_timeout: 250ms\n"
        "scrape_configs:\n  - job_name: ddprun\n    static_configs:\n      - targets: [";
    for (size_t i = 0; i < targets.size(); ++i) config += (i ? ", '" : "'") + targets[i] + "'";
    config += "]\n";
    write_text_file(dir + "/prometheus.yml", config);
    ChildOptions options;
    options.executable = DDPRUN_PROMETHEUS;
    options.args = {
        "--config.file=" + dir + "/prometheus.yml", "--storage.tsdb.path=" + dir + "/tsdb",
        "--web.listen-address=127.0.0.1:" + std::to_string(server->port_), "--log.level=warn"};
    options.env = env;
    options.cwd = dir;
    auto child = ChildProcess::start(options);
    if (!child) {
      ADD_FAILURE() << "starting prometheus: " << child.error_message();
      return nullptr;
    }
    server->process_ = std::move(child.value());
    return server;
  }

  // Polls until `ready()` holds or `timeout` passes. Prometheus has no event to wait on, so
  // this asks it every 100 ms (its scrapes run every 250 ms).
  template <class F>
  bool poll(F ready, std::chrono::milliseconds timeout) {
    const Deadline deadline = deadline_after(timeout);
    for (;;) {
      if (ready()) return true;
      if (TestClock::now() >= deadline) return false;
      std::this_thread::sleep_for(100ms);
    }
  }
  bool ready(std::chrono::milliseconds timeout) {
    return poll(
        [&] {
          auto r = http_get("127.0.0.1", port_, "/-/ready", 1s);
          return r.ok() && r->status == 200;
        },
        timeout);
  }
  // The instant vector of `query`: instance → value.
  std::map<std::string, double> query(const std::string& query) {
    std::string encoded;
    for (char c : query) {
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
        encoded += c;
      } else {
        char hex[4];
        std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(c));
        encoded += hex;
      }
    }
    std::map<std::string, double> values;
    auto r = http_get("127.0.0.1", port_, "/api/v1/query?query=" + encoded, 2s);
    if (!r.ok() || r->status != 200) return values;
    const auto json = nlohmann::json::parse(r->body, nullptr, false);
    // Read with value()/at(): a const json's operator[] on a missing key is undefined.
    if (!json.is_object() || json.value("status", "") != "success") return values;
    for (const auto& series : json.at("data").at("result")) {
      // "instance" is absent after an aggregation.
      const std::string instance = series.at("metric").value("instance", "");
      values[instance] = std::stod(series.at("value").at(1).get<std::string>());
    }
    return values;
  }
  void stop() {
    process_->send_signal(SIGTERM);
    const RunResult end = finish_child(*process_, deadline_after(20s));
    EXPECT_TRUE(end.exit.has_value()) << "prometheus did not stop on SIGTERM";
  }

 private:
  PrometheusServer() = default;
  uint16_t port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

TEST_F(MetricsTest, PrometheusRecordsTheGroupRestartAfterAWorkerFailure) {
  ASSERT_FALSE(std::string(DDPRUN_PROMETHEUS).empty())
      << "prometheus not found: install Debian's prometheus package (scripts/setup.sh)";
  ASSERT_NO_FATAL_FAILURE(start_daemon_with_metrics());
  make_fifo(out("fail.fifo"));
  make_fifo(out("done.fifo"));
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int n : {1, 2}) {
    nodes.push_back(start_node(node(n,
                                    {mn_worker("fail_on_release.py"), std::to_string(kFailingRank),
                                     std::to_string(kExitCode), out("fail.fifo"), out("done.fifo")},
                                    {"--max_restarts", "1"})));
    ASSERT_NE(nodes.back(), nullptr);
  }
  std::vector<std::string> targets;
  for (int n : {1, 2}) {
    const uint16_t port = metrics_port(*nodes[n - 1], node_addr(n));
    ASSERT_NE(port, 0);
    targets.push_back(node_addr(n) + ":" + std::to_string(port));
  }
  ASSERT_TRUE(wait_for_markers("run_n", 4, deadline_after(40s)));

  TempDir prometheus_dir;
  auto prometheus = PrometheusServer::start(prometheus_dir.path(), targets, env_);
  ASSERT_NE(prometheus, nullptr);
  ASSERT_TRUE(prometheus->ready(30s)) << "prometheus did not become ready";
  const std::string restarts =
      "ddprun_agent_group_restarts_total{job_id=\"metrics-job\",reason=\"worker_failure\"}";
  // Before the failure: both agents scraped, no restart yet.
  std::map<std::string, double> before;
  ASSERT_TRUE(prometheus->poll(
      [&] {
        before = prometheus->query(restarts);
        return before.size() == 2;
      },
      30s))
      << "prometheus never scraped both agents";
  for (const auto& [instance, value] : before) EXPECT_EQ(value, 0) << instance;

  release("fail.fifo", 1);  // rank 3 exits 3: both nodes restart their workers
  ASSERT_TRUE(wait_for_markers("run_n1_w4_r1_", 2, deadline_after(40s)));
  ASSERT_TRUE(wait_for_markers("run_n2_w4_r1_", 2, deadline_after(40s)));
  std::map<std::string, double> after;
  const bool recorded = prometheus->poll(
      [&] {
        after = prometheus->query(restarts);
        return after.size() == 2 && after.begin()->second == 1 && after.rbegin()->second == 1;
      },
      30s);
  EXPECT_TRUE(recorded) << "restart counters Prometheus holds: " << after.size()
                        << " series, first " << (after.empty() ? -1 : after.begin()->second);
  // The failure → restart time was recorded too, by the node whose worker failed.
  EXPECT_TRUE(prometheus->poll(
      [&] {
        const auto d = prometheus->query(
            "sum(ddprun_agent_restart_duration_seconds_count{job_id=\"metrics-job\"})");
        return d.size() == 1 && d.begin()->second == 1;
      },
      30s));
  prometheus->stop();

  release("done.fifo", 4);
  for (const RunResult& run : finish_all(nodes, deadline_after(30s))) {
    EXPECT_TRUE(ExitedWith(run, 0));
  }
}

}  // namespace
}  // namespace ddprun::testing
