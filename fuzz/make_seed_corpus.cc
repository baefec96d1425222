// Writes the seed corpora under fuzz/corpus/<target>/: real frames, streams and files made by
// the project's own encoders, the shipped configs, and the spellings users and torchrun write.
// The corpora are checked in; run this again after a protocol change:
//
//   build-fuzz/fuzz/make_seed_corpus <source dir>
//
// Each seed is small (the fuzzer grows its own corpus from them) and named after what it is.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/failure_report.h"
#include "rendezvous/server/job_snapshot.h"
#include "rendezvous/state/etcd/etcd_records.h"
#include "rendezvous/wire/codec.h"
#include "rendezvous/wire/payload_codec.h"
#include "snapshot_format.h"
#include "store/codec.h"

namespace fs = std::filesystem;
using namespace ddprun;

namespace {

fs::path corpus_root;

void seed(const std::string& target, const std::string& name, const std::string& bytes) {
  const fs::path dir = corpus_root / target;
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

agent::FailureReport sample_report() {
  agent::WorkerFailure f;
  f.local_rank = 1;
  f.rank = 5;
  f.pid = 31337;
  f.exit = agent::ExitStatus::exited(3);
  f.time = "2026-01-01_12:34:56";
  f.hostname = "node-2";
  f.error_file = "/tmp/torchelastic_x/attempt_0/1/error.json";
  f.error_file_written = true;
  f.error_message = "RuntimeError: CUDA out of memory";
  f.traceback = "Traceback (most recent call last):\n  File \"train.py\", line 9\n";
  f.stderr_tail = {"epoch 3 step 120", "RuntimeError: CUDA out of memory"};
  agent::WorkerFailure killed = f;
  killed.rank = 4;
  killed.local_rank = 0;
  killed.exit = agent::ExitStatus::killed(15);
  killed.error_file_written = false;
  killed.stderr_tail.clear();
  agent::FailureReport r;
  r.entrypoint = "train.py";
  r.failures = {f, killed};
  return r;
}

rdzv::JobOptions sample_job() {
  rdzv::JobOptions job;
  job.min_nodes = 2;
  job.max_nodes = 4;
  job.max_restarts = 3;
  job.join_timeout = Millis(900'000);
  job.last_call_timeout = Millis(30'000);
  job.heartbeat_timeout = Millis(15'000);
  job.exit_barrier_timeout = Millis(300'000);
  return job;
}

// Stand-ins for a nonce and an HMAC proof: the sizes of the real ones, fixed bytes (the
// fuzzer does not verify proofs, it decodes frames).
const std::string kNonce(32, '\x5a');
const std::string kProof(32, '\xc3');

std::vector<rdzv::RankProgressEntry> sample_ranks() {
  return {{4, 0, 120, 250, true, 2, "load at data.py:88", 153'000},
          {5, 1, -1, 61'000, false, 0, ""},
          {6, 2, 120, 300, true, 1, "barrier at distributed_c10d.py:3152"}};
}

void rendezvous_client_seeds() {
  using namespace rdzv;
  const std::string report = nlohmann::json(sample_report()).dump();
  NodeInfo node{"node-2:4242:9f3a", 2, std::nullopt, "127.0.0.2", 41234};
  NodeInfo ranked = node;
  ranked.node_rank_hint = 1;
  const std::vector<std::pair<std::string, ClientMessage>> frames = {
      {"hello", Hello{kProtocolMagic, kProtocolVersion, "job-42", ""}},
      // Protocol v3's token handshake: a Hello with the client's nonce, then its proof
      // (HMAC-SHA256: 32 bytes), or an empty proof when the server's did not verify.
      {"hello_nonce", Hello{kProtocolMagic, kProtocolVersion, "job-42", kNonce}},
      {"auth_proof", AuthProofMsg{kProof}},
      {"auth_proof_empty", AuthProofMsg{""}},
      {"join", JoinMsg{1, node, sample_job()}},
      {"join_rank_hint", JoinMsg{2, ranked, sample_job()}},
      {"resume", ResumeMsg{3, "node-2:4242:9f3a", 0x9e3779b97f4a7c15ull, 2}},
      {"heartbeat", HeartbeatMsg{1}},
      {"report_failure", ReportFailureMsg{4, 2, report, 3}},
      {"report_success", ReportSuccessMsg{5, 2}},
      {"leave", LeaveMsg{6, {}}},
      {"leave_excluded", LeaveMsg{7, "its workers caused 2 of the last 3 failures"}},
      {"progress", ProgressMsg{8, 2, 0, sample_ranks()}},
      {"progress_stragglers", ProgressMsg{9, 2, 1500, sample_ranks()}},
      {"progress_query", ProgressQueryMsg{7}},
      {"status_query", StatusQuery{kProtocolMagic, kProtocolVersion, kNonce, ""}},
      // `ddp-rendezvous release`: a status query naming the host to let back in (since v8).
      {"status_query_release", StatusQuery{kProtocolMagic, kProtocolVersion, "", "127.0.0.3"}},
  };
  std::string session;
  for (const auto& [name, message] : frames) {
    seed("rdzv_client_frames", name, encode_frame(message));
    session += encode_frame(message);
  }
  seed("rdzv_client_frames", "session", session);
}

// A status report with a job, a node and a host kept out (since v8).
rdzv::StatusReport excluded_report() {
  using namespace rdzv;
  StatusReport report;
  JobStatus job{"job-42", JobPhase::kRunning, 2, 1, 3, 2, 2, 1, {}, {}};
  job.nodes.push_back({"node-1:4242:9f3a", "127.0.0.1:40000", NodePhase::kMember, 0, 2, 120});
  report.jobs.push_back(job);
  report.excluded_hosts.push_back({"127.0.0.3", "its workers caused 2 of the last 3 failures",
                                   "job-42", "127.0.0.3:4243", 1'790'000'000'000,
                                   1'790'003'600'000});
  return report;
}

void rendezvous_server_seeds() {
  using namespace rdzv;
  const std::string report = nlohmann::json(sample_report()).dump();
  const std::vector<NodeProgress> progress = {{"node-1", "127.0.0.1", 0, sample_ranks()},
                                              {"node-2", "127.0.0.2", 1, {}}};
  const std::vector<std::pair<std::string, ServerMessage>> frames = {
      {"auth_challenge", AuthChallenge{kNonce, kProof}},
      {"hello_ack", HelloAck{kProtocolVersion}},
      {"reply_token", Reply{1, true, "", 0x1234567890abcdefll, ""}},
      {"reply_error", Reply{2, false, "job 'x' already succeeded", 0, ""}},
      {"reply_progress", Reply{3, true, "", 0, encode_job_progress(progress)}},
      {"reply_stragglers",
       Reply{4, true, "", 0,
             encode_stragglers({1500, 3, 200'000, {{5, 1, "127.0.0.2", 420'000}}})}},
      {"round_assigned", RoundAssigned{"job-42", 2, 1, 2, 2, 2, 4, "127.0.0.1", 41000, 1, 3}},
      {"restart_scale_up", RestartRequested{2, RestartReason::kScaleUp, "a node joins", ""}},
      {"restart_member_lost", RestartRequested{2, RestartReason::kMemberLost, "node-3 left", ""}},
      {"restart_worker_failure",
       RestartRequested{2, RestartReason::kWorkerFailure, "rank 5 failed", report}},
      {"job_failed", JobFailed{JobFailureReason::kRestartsExhausted, "no restarts", report, 3}},
      {"job_failed_too_few", JobFailed{JobFailureReason::kTooFewNodes, "1 of 2 nodes", "", 1}},
      {"job_succeeded", JobSucceeded{2}},
      {"heartbeat_ack", HeartbeatAck{}},
      {"error", ErrorMsg{"rendezvous server shutting down"}},
      {"status_report_excluded", excluded_report()},
  };
  std::string session;
  for (const auto& [name, message] : frames) {
    seed("rdzv_server_frames", name, encode_frame(message));
    session += encode_frame(message);
  }
  seed("rdzv_server_frames", "session", session);
  seed("rdzv_job_progress", "two_nodes", encode_job_progress(progress));
  seed("rdzv_job_progress", "none", encode_job_progress({}));
  seed("rdzv_job_progress", "one_node_no_ranks",
       encode_job_progress({{"node-9", "10.0.0.9", 7, {}}}));
}

// A store stream: the chunking byte, then the queries.
std::string store_stream(uint8_t chunking, store::Dialect dialect,
                         const std::vector<store::Request>& requests) {
  std::string out(1, static_cast<char>(chunking));
  for (const auto& r : requests) out += store::encode_request(r, dialect);
  return out;
}

void store_seeds() {
  using store::Op;
  using R = store::Request;
  // What torch 1.13's TCPStore sends: rendezvous keys, a counter, a barrier.
  const std::vector<R> legacy = {
      R{Op::kSet, {"/rdzv/version"}, {"1"}},
      R{Op::kAdd, {"/init/count"}, {}, 1},
      R{Op::kCompareSet, {"/rdzv/state"}, {"", "joining"}},
      R{Op::kWait, {"/init/count", "/rdzv/version"}},
      R{Op::kGet, {"/rdzv/version"}},
      R{Op::kCheck, {"/rdzv/state"}},
      R{Op::kNumKeys},
      R{Op::kWatchKey, {"/rdzv/state"}},
      R{Op::kDeleteKey, {"/init/count"}},
      R{Op::kAppend, {"/log"}, {"rank0;"}},
      R{Op::kMultiSet, {"/a", "/b"}, {"1", "2"}},
      R{Op::kMultiGet, {"/a", "/b"}},
      R{Op::kCancelWait},
  };
  seed("store_stream", "legacy_torch113", store_stream(7, store::Dialect::kLegacy, legacy));
  // torch 2.x: VALIDATE first, PING, then the same plus queues.
  std::vector<R> validated = {R{Op::kValidate, {}, {}, 0, store::kValidationMagic},
                              R{Op::kPing, {}, {}, 0, 4242}};
  for (const R& r : legacy) {
    if (r.op != Op::kWatchKey) validated.push_back(r);
  }
  validated.push_back(R{Op::kQueuePush, {"/q"}, {"item"}});
  validated.push_back(R{Op::kQueueLen, {"/q"}});
  validated.push_back(R{Op::kQueuePop, {"/q"}});
  validated.push_back(R{Op::kListKeys});
  validated.push_back(R{Op::kBarrier, {"/barrier"}, {}, 1});
  validated.push_back(R{Op::kBarrier, {"/barrier2"}, {}, 2});
  seed("store_stream", "validated_torch2",
       store_stream(200, store::Dialect::kValidated, validated));
  seed("store_stream", "wait_then_set",
       store_stream(1, store::Dialect::kLegacy,
                    {R{Op::kWait, {"/go"}}, R{Op::kSet, {"/go"}, {"1"}}, R{Op::kGet, {"/go"}}}));
}

// As SLURM writes SLURM_JOB_NODELIST; the first byte picks the limits (0: the defaults).
void hostlist_seeds() {
  const std::vector<std::pair<std::string, std::string>> lists = {
      {"one", "node1"},
      {"range", "gpu[01-04,07],login1"},
      {"product", "r[1-2]n[01-02]"},
      {"wide", "a[0001-0128]"},
      {"plain_list", "c1,c2,c3"},
      {"dashes", "rack-1-node[1-3]"},
      {"unbalanced", "gpu[01-04"},
      {"reversed", "gpu[09-02]"},
  };
  for (const auto& [name, text] : lists) {
    seed("slurm_hostlist", name, std::string(1, '\0') + text);
    seed("slurm_hostlist", name + "_tight", std::string(1, '\1') + text);
  }
}

// --health_check values: built-in checks, a command, both, and refusals.
void health_check_seeds() {
  const std::vector<std::pair<std::string, std::string>> values = {
      {"command", "./site-check.sh --strict"},
      {"builtin", "builtin:gpu,nic,path=/data"},
      {"builtin_counted", "builtin:gpu=8,nic=eth0+mlx5_0,path=/data:min_free=50G"},
      {"both", "builtin:gpu=8,path=/scratch:min_free=10G  ./site-check.sh"},
      {"items_only", "gpu,path=/a:min_free=1K,path=/b"},
      {"unknown_item", "builtin:disk"},
      {"bad_size", "builtin:path=/data:min_free=10X"},
      {"twice", "builtin:gpu,gpu=2"},
  };
  for (const auto& [name, text] : values) seed("health_check", name, text);
}

void rdzv_conf_seeds() {
  const std::vector<std::pair<std::string, std::string>> confs = {
      {"torchrun_defaults", "join_timeout=600,last_call_timeout=30,close_timeout=30"},
      {"keep_alive", "keep_alive_interval=5,keep_alive_max_attempt=3"},
      {"units", "heartbeat_timeout=250ms, keep_alive_interval=0.1s ,read_timeout=2s"},
      {"etcd_style", "timeout=1800,store_type=tcp,use_libuv=1"},
      {"is_host", "is_host=false,read_timeout=60"},
      {"unknown_key", "join_timout=900"},
      {"multinode_tests",
       "join_timeout=20,last_call_timeout=1,heartbeat_timeout=2,"
       "keep_alive_interval=0.5"},
      // Protocol v3: a token and TLS files.
      {"token_tls",
       "token_file=/etc/ddprun/job.token,tls_ca_file=ca.pem,tls_cert_file=node.pem,"
       "tls_key_file=node.key,tls_server_name=rdzv.example"},
  };
  for (const auto& [name, text] : confs) seed("rdzv_conf", name, text);
}

void failure_report_seeds() {
  seed("failure_report", "two_failures", nlohmann::json(sample_report()).dump());
  agent::FailureReport hung = sample_report();
  hung.failures.resize(1);
  hung.failures[0].hung = true;
  hung.failures[0].exit = agent::ExitStatus::killed(6);
  seed("failure_report", "hung", nlohmann::json(hung).dump());
  seed("failure_report", "empty", "{\"entrypoint\":\"train.py\",\"failures\":[]}");
  seed("failure_report", "stderr_lines", "epoch 3\nTraceback (most recent call last):\n  x\n");
}

void error_file_seeds() {
  // The first byte says how the worker ended (exit_of in error_file_fuzzer.cc): 3 exit code 1,
  // 6 exit code 2, 28 SIGKILL, 68 stopped by SIGTTOU.
  seed("error_file", "torchrun_record",
       std::string(1, '\x03') +
           R"({"message": {"message": "RuntimeError: boom", "extraInfo": {"py_callstack": )"
           R"("Traceback (most recent call last):\n  File \"train.py\", line 3\n", )"
           R"("timestamp": "1700000000"}}})");
  seed("error_file", "message_string", std::string(1, '\x06') + R"({"message": "worker gave up"})");
  seed("error_file", "killed_no_json", std::string(1, '\x1c') + "Segmentation fault");
  seed("error_file", "stopped", std::string(1, '\x44') + "{}");
}

void snapshot_seeds() {
  ddp::detail::SnapshotHeader h;
  h.epoch = 3;
  h.step_in_epoch = 17;
  h.global_step = 1217;
  h.world_size = 4;
  h.user = {{"lr", "0.05"}, {"best_accuracy", "0.913"}};
  seed("snapshot_header", "with_user_keys", ddp::detail::encode_snapshot(h, "PK\x03\x04payload"));
  seed("snapshot_header", "empty_payload", ddp::detail::encode_snapshot({}, ""));
}

void config_seeds(const fs::path& source) {
  for (const auto& entry : fs::directory_iterator(source / "configs")) {
    if (entry.path().extension() != ".yaml") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    seed("config_file", entry.path().filename().string(),
         std::string(std::istreambuf_iterator<char>(in), {}));
  }
  seed("config_file", "flow_style",
       "{nnodes: '1:2', redirects: '0:1,1:2', tee: 3, numa_binding: socket, "
       "local_ranks_filter: [0, 1], rdzv_conf: {join_timeout: 5}}\n");
}

}  // namespace

// Jobs as the etcd state store writes them: a gathering round, a running one, a failed one,
// and a job record alone as an older daemon wrote it.
void stored_job_seeds() {
  rdzv::JobOptions o = sample_job();
  o.min_nodes = 2;
  o.max_nodes = 3;
  o.max_restarts = 1;
  const SteadyTime now{};
  rdzv::RoundState state("seed", o, now);
  auto save = [&](const std::string& name) {
    seed("stored_job", name,
         rdzv::state::encode_job_records(
             rdzv::encode_job_snapshot(state, {{"a", 11}, {"b", 22}, {"c", 33}}, {{"a", 7}})));
  };
  (void)state.join(rdzv::NodeInfo{"a", 2, {}, "10.0.0.1", 29500}, o, now);
  save("gathering");
  (void)state.join(rdzv::NodeInfo{"b", 1, 0u, "10.0.0.2", 29500}, o, now);
  (void)state.join(rdzv::NodeInfo{"c", 1, {}, "10.0.0.3", 29500}, o, now);
  save("running");
  (void)state.report_failure("b", state.round(), R"({"failures":[]})", 3, now);
  save("restarting");
  (void)state.report_failure("a", state.round(), "{}", 1, now);
  save("after_two_failures");
  seed("stored_job", "old_whole_record", rdzv::encode_job_snapshot(state, {{"a", 11}}).job);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_seed_corpus <ddprun source dir>\n";
    return 2;
  }
  corpus_root = fs::path(argv[1]) / "fuzz" / "corpus";
  rendezvous_client_seeds();
  rendezvous_server_seeds();
  store_seeds();
  rdzv_conf_seeds();
  hostlist_seeds();
  health_check_seeds();
  failure_report_seeds();
  error_file_seeds();
  snapshot_seeds();
  config_seeds(argv[1]);
  stored_job_seeds();
  std::cout << "seeds written under " << corpus_root.string() << "\n";
  return 0;
}
