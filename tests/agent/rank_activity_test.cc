// Reading what a stopped rank was doing from what it printed: faulthandler dumps of torch 1.13
// and 2.x (captured from real gloo workers), tracebacks of ranks that died of a lost peer, the
// worker SDK's marker lines, and text that shows nothing.
#include "agent/progress/rank_activity.h"

#include <gtest/gtest.h>

#include <sstream>

namespace ddprun::agent {
namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

constexpr char kExtensions[] =
    "Extension modules: torch._C, torch._C._fft, numpy.core._multiarray_umath (total: 3)\n";

TEST(RankActivity, Torch1BarrierIsACollective) {
  const auto finding = read_activity(
      lines(std::string(
                "hello from rank 0\n"
                "Fatal Python error: Aborted\n\n"
                "Current thread 0x00007fd980abd040 (most recent call first):\n"
                "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", "
                "line 3152 in barrier\n"
                "  File \"/tmp/exp/bar.py\", line 9 in <module>\n\n") +
            kExtensions));
  EXPECT_EQ(finding.activity, RankActivity::kInCollective);
  EXPECT_EQ(finding.where, "barrier at distributed_c10d.py:3152");
}

TEST(RankActivity, Torch2BarrierUnderItsLoggingWrapperIsACollective) {
  const auto finding = read_activity(lines(
      "Fatal Python error: Aborted\n\n"
      "Current thread 0x00007f6f53423040 (most recent call first):\n"
      "  File \"/v/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py\", line 6614 "
      "in barrier\n"
      "  File \"/v/lib/python3.11/site-packages/torch/distributed/c10d_logger.py\", line 83 in "
      "wrapper\n"
      "  File \"/tmp/exp/bar.py\", line 9 in <module>\n"));
  EXPECT_EQ(finding.activity, RankActivity::kInCollective);
}

TEST(RankActivity, ASleepInTheScriptIsElsewhere) {
  const auto finding =
      read_activity(lines("Fatal Python error: Aborted\n\n"
                          "Current thread 0x00007f1d3c9f2040 (most recent call first):\n"
                          "  File \"/tmp/exp/bar.py\", line 7 in <module>\n"));
  EXPECT_EQ(finding.activity, RankActivity::kElsewhere);
  EXPECT_EQ(finding.where, "<module> at bar.py:7");
}

TEST(RankActivity, DdpBackwardIsACollectiveButElasticIsNot) {
  const auto backward = read_activity(
      lines("Fatal Python error: Aborted\n\n"
            "Current thread 0x1 (most recent call first):\n"
            "  File \"/p/torch/autograd/graph.py\", line 829 in _engine_run_backward\n"
            "  File \"/p/torch/autograd/__init__.py\", line 353 in backward\n"
            "  File \"/p/torch/_tensor.py\", line 626 in backward\n"
            "  File \"/w/train.py\", line 30 in step\n"));
  EXPECT_EQ(backward.activity, RankActivity::kInCollective);
  const auto elastic = read_activity(
      lines("Fatal Python error: Aborted\n\n"
            "Current thread 0x1 (most recent call first):\n"
            "  File \"/p/torch/distributed/elastic/timer/file_based_local_timer.py\", line 90 in "
            "acquire\n"));
  EXPECT_EQ(elastic.activity, RankActivity::kElsewhere);
}

TEST(RankActivity, TheMainThreadIsTheLastBlock) {
  // A data-loading thread sits in torch.distributed; the main thread is in the script.
  const auto finding = read_activity(
      lines("Fatal Python error: Aborted\n\n"
            "Thread 0x00007f00000002 (most recent call first):\n"
            "  File \"/p/torch/distributed/distributed_c10d.py\", line 1 in broadcast\n"
            "  File \"/usr/lib/python3.11/threading.py\", line 975 in run\n\n"
            "Current thread 0x00007f00000001 (most recent call first):\n"
            "  File \"/w/train.py\", line 12 in load\n"
            "  File \"/w/train.py\", line 40 in <module>\n"));
  EXPECT_EQ(finding.activity, RankActivity::kElsewhere);
  EXPECT_EQ(finding.where, "load at train.py:12");
}

TEST(RankActivity, ARankThatDiedInsideACollectiveOfALostPeerWasWaiting) {
  const auto finding = read_activity(lines(
      "Traceback (most recent call last):\n"
      "  File \"/w/train.py\", line 9, in <module>\n"
      "    dist.barrier()\n"
      "  File \"/p/torch/distributed/distributed_c10d.py\", line 3152, in barrier\n"
      "    work.wait()\n"
      "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by "
      "peer [127.0.0.1]:4242\n"));
  EXPECT_EQ(finding.activity, RankActivity::kInCollective);
  EXPECT_EQ(finding.where, "barrier at distributed_c10d.py:3152");
}

// torch 2.x prefixes an uncaught exception's lines with the rank (seen in the two-node test).
TEST(RankActivity, Torch2RankPrefixedTracebacksAreRead) {
  const auto finding = read_activity(
      lines("[rank0]: Traceback (most recent call last):\n"
            "[rank0]:   File \"/w/torch_hang.py\", line 55, in main\n"
            "[rank0]:     dist.barrier()\n"
            "[rank0]:   File \"/v/torch/distributed/c10d_logger.py\", line 83, in wrapper\n"
            "[rank0]:     return func(*args, **kwargs)\n"
            "[rank0]:            ^^^^^^^^^^^^^^^^^^^^^\n"
            "[rank0]:   File \"/v/torch/distributed/distributed_c10d.py\", line 6614, in barrier\n"
            "[rank0]:     work.wait()\n"
            "[rank0]: RuntimeError: Connection closed by peer [127.0.0.1]:7841.\n"
            "Fatal Python error: Aborted\n\n"
            "Current thread 0x00007f287f190040 (most recent call first):\n"
            "  File \"/v/torch/library.py\", line 674 in _del_library\n"
            "  File \"/usr/lib/python3.11/weakref.py\", line 666 in _exitfunc\n"));
  EXPECT_EQ(finding.activity, RankActivity::kInCollective);
  EXPECT_EQ(finding.where, "barrier at distributed_c10d.py:6614");
}

// Seen in the two-node test: a rank printing the traceback of its failed barrier was stopped
// half-way; the outermost frame alone must not make it a rank "elsewhere".
TEST(RankActivity, ATracebackCutShortSaysNothing) {
  const auto finding =
      read_activity(lines("Traceback (most recent call last):\n"
                          "  File \"/w/torch_hang.py\", line 65, in <module>\n"
                          "Fatal Python error: Aborted\n\n"
                          "Current thread 0x00007f3afff8e040 (most recent call first):\n"
                          "  <no Python frame>\n"));
  EXPECT_EQ(finding.activity, RankActivity::kUnreadable);
  EXPECT_EQ(read_activity(lines("Traceback (most recent call last):\n"
                                "  File \"/w/train.py\", line 3, in <module>\n"))
                .activity,
            RankActivity::kUnreadable);
}

// Issue 34, seen in the two-node hang test: a rank whose collective failed (a peer node's rank
// was stopped first) was stopped while ddprun's bootstrap printed that exception. The stack showed
// only the bootstrap's frame: that is not what the rank was doing, and made it a culprit.
TEST(RankActivity, FramesOfDdprunsBootstrapAreNotTheRanksOwn) {
  const auto printing =
      read_activity(lines("Traceback (most recent call last):\n"
                          "  File \"/w/torch_hang.py\", line 65, in <module>\n"
                          "Fatal Python error: Aborted\n\n"
                          "Thread 0x2 (most recent call first):\n"
                          "  File \"/w/loader.py\", line 7 in fetch\n\n"
                          "Current thread 0x1 (most recent call first):\n"
                          "  File \"/tmp/d/_ddprun_bootstrap.py\", line 249 in _print_uncaught\n"
                          "  File \"/tmp/d/_ddprun_bootstrap.py\", line 301 in run\n"));
  EXPECT_EQ(printing.activity, RankActivity::kUnreadable) << printing.where;
  // The same in a worker forked from the preload template: its frame is under the bootstrap's.
  const auto forked = read_activity(lines(
      "Fatal Python error: Aborted\n\n"
      "Current thread 0x1 (most recent call first):\n"
      "  File \"/tmp/ddprun-preload-Ab12/_ddprun_bootstrap.py\", line 249 in _print_uncaught\n"
      "  File \"/tmp/ddprun-preload-Ab12/template.py\", line 243 in <module>\n"));
  EXPECT_EQ(forked.activity, RankActivity::kUnreadable) << forked.where;
  // Inside a hook's bookkeeping: the rank's own frame under it decides.
  const auto hooked =
      read_activity(lines("Fatal Python error: Aborted\n\n"
                          "Current thread 0x1 (most recent call first):\n"
                          "  File \"/tmp/d/_ddprun_progress.py\", line 88 in _on_step\n"
                          "  File \"/p/torch/optim/optimizer.py\", line 500 in wrapper\n"
                          "  File \"/w/train.py\", line 12 in <module>\n"));
  EXPECT_EQ(hooked.activity, RankActivity::kElsewhere);
  EXPECT_EQ(hooked.where, "wrapper at optimizer.py:500");
}

// Regression (a full run named rank 0 beside the hung rank 3, "in __getitem__ at <frozen
// os>:676"): rank 0's barrier had failed when its peer was stopped, and SIGABRT found the
// bootstrap telling the agent so, inside os.environ.
TEST(RankActivity, WhatDdprunsOwnCodeCalledIsNotTheRanksOwn) {
  const auto telling =
      read_activity(lines("Fatal Python error: Aborted\n\n"
                          "Current thread 0x1 (most recent call first):\n"
                          "  File \"<frozen os>\", line 676 in __getitem__\n"
                          "  File \"<frozen _collections_abc>\", line 774 in get\n"
                          "  File \"/tmp/d/_ddprun_bootstrap.py\", line 279 in _tell_agent\n"
                          "  File \"/tmp/d/_ddprun_bootstrap.py\", line 63 in run\n"
                          "  File \"/tmp/d/_ddprun_bootstrap.py\", line 429 in _main\n"
                          "  File \"/tmp/d/_ddprun_bootstrap.py\", line 436 in <module>\n"));
  EXPECT_EQ(telling.activity, RankActivity::kUnreadable) << telling.where;
  // A collective the script called, timed by the progress module's wrapper: a collective.
  const auto wrapped = read_activity(
      lines("Fatal Python error: Aborted\n\n"
            "Current thread 0x1 (most recent call first):\n"
            "  File \"/p/torch/distributed/distributed_c10d.py\", line 3152 in barrier\n"
            "  File \"/tmp/d/_ddprun_progress.py\", line 394 in wrapper\n"
            "  File \"/w/torch_hang.py\", line 55 in main\n"
            "  File \"/tmp/d/_ddprun_bootstrap.py\", line 115 in _run_script\n"
            "  File \"/tmp/d/_ddprun_bootstrap.py\", line 50 in run\n"));
  EXPECT_EQ(wrapped.activity, RankActivity::kInCollective) << wrapped.where;
  EXPECT_EQ(wrapped.where, "barrier at distributed_c10d.py:3152");
  // Stopped in the wrapper's bookkeeping as the collective returned (or failed because its
  // peers were stopped first): still at that collective, not elsewhere (CI, torch 1.13:
  // TorchHangAcrossNodesTest/after_barrier named rank 0 "in main at torch_hang.py:55").
  const auto unwinding =
      read_activity(lines("Fatal Python error: Aborted\n\n"
                          "Current thread 0x1 (most recent call first):\n"
                          "  File \"/tmp/d/_ddprun_progress.py\", line 131 in end_waiting\n"
                          "  File \"/tmp/d/_ddprun_progress.py\", line 396 in wrapper\n"
                          "  File \"/w/torch_hang.py\", line 55 in main\n"
                          "  File \"/tmp/d/_ddprun_bootstrap.py\", line 115 in _run_script\n"
                          "  File \"/tmp/d/_ddprun_bootstrap.py\", line 50 in run\n"));
  EXPECT_EQ(unwinding.activity, RankActivity::kInCollective) << unwinding.where;
  EXPECT_EQ(unwinding.where, "main at torch_hang.py:55");
  // What the script runs (the standard library among it) is the rank's own.
  const auto sleeping =
      read_activity(lines("Fatal Python error: Aborted\n\n"
                          "Current thread 0x1 (most recent call first):\n"
                          "  File \"/usr/lib/python3.11/selectors.py\", line 415 in select\n"
                          "  File \"/w/train.py\", line 12 in load\n"
                          "  File \"/tmp/d/_ddprun_bootstrap.py\", line 115 in _run_script\n"
                          "  File \"/tmp/d/_ddprun_bootstrap.py\", line 50 in run\n"));
  EXPECT_EQ(sleeping.activity, RankActivity::kElsewhere);
  EXPECT_EQ(sleeping.where, "select at selectors.py:415");
}

TEST(RankActivity, TheLatestReadableDumpWins) {
  const auto finding =
      read_activity(lines("Traceback (most recent call last):\n"
                          "  File \"/w/train.py\", line 3, in load\n"
                          "OSError: handled and retried\n"
                          "Fatal Python error: Aborted\n\n"
                          "Current thread 0x1 (most recent call first):\n"
                          "  File \"/w/train.py\", line 5 in spin\n"
                          "Fatal Python error: Aborted\n\n"
                          "Current thread 0x1 (most recent call first):\n"
                          "  <no Python frame>\n"));
  EXPECT_EQ(finding.activity, RankActivity::kElsewhere);
  EXPECT_EQ(finding.where, "spin at train.py:5");
}

// Seen in the two-node soak: a rank whose collective failed (its peer was stopped a moment
// earlier) was still tearing down when its own SIGABRT came; the stack of the teardown must not
// make it a culprit.
TEST(RankActivity, ACollectiveThatFailedOutweighsTheTeardownAfterIt) {
  const auto python = read_activity(
      lines("Traceback (most recent call last):\n"
            "  File \"/w/train.py\", line 9, in <module>\n"
            "  File \"/p/torch/distributed/distributed_c10d.py\", line 3152, in barrier\n"
            "RuntimeError: Connection closed by peer\n"
            "Fatal Python error: Aborted\n\n"
            "Current thread 0x1 (most recent call first):\n"
            "  File \"/usr/lib/python3.11/threading.py\", line 1590 in _shutdown\n"));
  EXPECT_EQ(python.activity, RankActivity::kInCollective);
  const auto sdk = read_activity(
      lines("trainer failed: ddp rank 0: all_reduce_async: Connection closed by peer\n"
            "*** SIGABRT: Aborted (fatal signal 6, sent by pid 10, pid 11, thread 11)\n"
            "*** ddp: waiting in a collective (all_reduce_async, which failed)\n"
            "Native backtrace (most recent call first):\n"
            "  #0 0x7f305265bff7 __cxa_finalize\n"));
  EXPECT_EQ(sdk.activity, RankActivity::kInCollective);
  EXPECT_EQ(sdk.where, "all_reduce_async, which failed");
}

TEST(RankActivity, TheSdkSaysWhetherItWasInACollective) {
  auto waiting = read_activity(
      lines("*** SIGABRT: Aborted (fatal signal 6, sent by pid 10, pid 11, thread 11)\n"
            "*** ddp: waiting in a collective (all_reduce)\n"
            "Native backtrace (most recent call first):\n"
            "  #0 0x7f... in __futex_abstimed_wait_common\n"));
  EXPECT_EQ(waiting.activity, RankActivity::kInCollective);
  EXPECT_EQ(waiting.where, "all_reduce");
  auto busy = read_activity(lines("*** ddp: not in a collective\nNative backtrace:\n"));
  EXPECT_EQ(busy.activity, RankActivity::kElsewhere);
}

TEST(RankActivity, NothingReadableIsUnreadable) {
  EXPECT_EQ(read_activity({}).activity, RankActivity::kUnreadable);
  EXPECT_EQ(read_activity(lines("step 3\nstep 4\n")).activity, RankActivity::kUnreadable);
  // A dump cut off before its frames.
  EXPECT_EQ(read_activity(lines("Fatal Python error: Aborted\n\nCurrent thread 0x1 (most "
                                "recent call first):\n"))
                .activity,
            RankActivity::kUnreadable);
  // A frame line that is not one.
  EXPECT_EQ(read_activity(lines("Fatal Python error: Aborted\nCurrent thread 0x1 (most recent "
                                "call first):\n  File \"x.py\", line q in f\n"))
                .activity,
            RankActivity::kUnreadable);
}

}  // namespace
}  // namespace ddprun::agent
