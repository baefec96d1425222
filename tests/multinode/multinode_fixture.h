// The fixture of the multi-node tests: several ddprun agents (nodes) on one machine, each on
// its own loopback address 127.0.0.<N> (--local_addr), meeting at a rendezvous endpoint whose
// port comes from binding port 0 (or from ddp-rendezvous --port 0). Builds on the integration
// tests' harness (tests/integration): a private temp dir that is also TMPDIR, ChildProcess
// handles that SIGKILL their process group when destroyed (so every node a failing test started
// dies with it), and a teardown that fails the test when a worker outlived its agent.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/integration/ddprun_fixture.h"
#include "tests/support/free_port.h"

namespace ddprun::testing {

// 127.0.0.<n>.
std::string node_addr(int n);

// A TCP port that was free on `addr` a moment ago, for ddprun to bind by number: one below the
// ephemeral range (tests/support/free_port.h), so that no connection or port-0 server of a test
// running beside this one takes it first.
uint16_t free_port(const std::string& addr = "127.0.0.1");

// The rendezvous knobs every multi-node test uses: short, so that a test is quick, but long
// enough for two cores shared by many processes.
struct RdzvTimeouts {
  std::string join_timeout = "20";
  std::string last_call_timeout = "1";
  std::string heartbeat_timeout = "2";
  std::string keep_alive_interval = "0.5";
  std::string more;          // further "k=v,..." appended (token_file, tls_*)
  std::string conf() const;  // the --rdzv_conf value
};

// What one c10d node runs: `ddprun --nnodes <nnodes> --nproc_per_node <nproc> --rdzv_backend
// c10d --rdzv_endpoint <endpoint> --rdzv_id <job> --local_addr 127.0.0.<node> --rdzv_conf ...
// <extra...> <entry...>`.
struct NodeSpec {
  int node = 1;  // the N of 127.0.0.N; also DDPRUN_TEST_NODE for its workers
  std::string nnodes = "2";
  int nproc_per_node = 2;
  std::string endpoint;  // host:port
  std::string job = "job";
  RdzvTimeouts timeouts;
  std::vector<std::string> extra;  // more ddprun flags, before the entry point
  std::vector<std::string> entry;  // script (or --no_python executable) and its arguments
};

class MultinodeTest : public DdprunTest {
 protected:
  // A worker in tests/multinode/workers/.
  static std::string mn_worker(const std::string& name);
  static std::string daemon_binary();

  // Starts one c10d node; fails the test (nullptr) when it cannot start.
  std::unique_ptr<ChildProcess> start_node(const NodeSpec& spec);
  // Starts a ddprun with arbitrary arguments as node `node` (DDPRUN_TEST_NODE=<node>).
  std::unique_ptr<ChildProcess> start_node_args(int node, const std::vector<std::string>& args);
  // Starts `executable args...` as node `node`: the test's environment, DDPRUN_TEST_NODE, the
  // temp dir as working directory. Fails the test (nullptr) when it cannot start.
  std::unique_ptr<ChildProcess> start_as_node(int node, const std::string& executable,
                                              const std::vector<std::string>& args);

  // Starts ddp-rendezvous on 127.0.0.1, port 0; waits for its "listening on" line and returns
  // "127.0.0.1:<port>" through `endpoint`. nullptr (and a failure) when it does not come up.
  // `extra`: more daemon flags.
  std::unique_ptr<ChildProcess> start_daemon(std::string* endpoint,
                                             const std::vector<std::string>& extra = {});

  // Waits until `ddp-rendezvous status --endpoint <endpoint>` lists a waiting (standby) node.
  // Polled: nothing pushes a spare's arrival to a test.
  ::testing::AssertionResult wait_for_standby_node(const std::string& endpoint,
                                                   Deadline deadline) const;

  // The markers (JSON) whose names start with `prefix`, by name.
  std::map<std::string, nlohmann::json> markers(const std::string& prefix) const;
  // Waits until at least `count` markers start with `prefix`. Event-driven: inotify on the
  // output directory wakes it on every rename into it.
  bool wait_for_markers(const std::string& prefix, std::size_t count, Deadline deadline) const;

  // Writes `bytes` bytes to the FIFO `name` in the output directory, which workers hold open.
  void release(const std::string& name, std::size_t bytes);

  // Waits for every node in `nodes` (one shared deadline) and returns their results in order;
  // a node still running at the deadline is SIGKILLed (see DdprunTest::finish).
  static std::vector<RunResult> finish_all(std::vector<std::unique_ptr<ChildProcess>>& nodes,
                                           Deadline deadline);
};

// The part of a ddprun stderr from the failure report's "Root Cause" heading to the closing
// '=' line.
std::string root_cause_section(const std::string& err);

}  // namespace ddprun::testing
