// Command-line errors: exit code 2 and a "ddprun: error:" message naming the problem, and no
// worker started.
#include <boost/asio/ip/tcp.hpp>

#include "tests/integration/ddprun_fixture.h"

namespace ddprun::testing {
namespace {

class CliErrorTest : public DdprunTest {
 protected:
  // Runs ddprun with `flags` before a worker that would record its start; expects exit 2, a
  // message containing `names`, and no worker.
  void expect_usage_error(const std::vector<std::string>& flags, const std::string& names) {
    std::vector<std::string> args = flags;
    args.push_back(worker("echo_args.py"));
    const RunResult run = run_ddprun(args);
    EXPECT_TRUE(ExitedWith(run, 2));
    EXPECT_NE(run.err.find("ddprun: error:"), std::string::npos) << run.err;
    EXPECT_NE(run.err.find(names), std::string::npos) << "message does not name " << names << ":\n"
                                                      << run.err;
    EXPECT_TRUE(list_dir(out_dir()).empty()) << "a worker ran";
  }
};

TEST_F(CliErrorTest, UnknownFlag) { expect_usage_error({"--bogus_flag", "1"}, "--bogus_flag"); }

TEST_F(CliErrorTest, UnknownShortFlag) { expect_usage_error({"-q"}, "-q"); }

TEST_F(CliErrorTest, NprocPerNodeNotANumber) {
  expect_usage_error({"--nproc_per_node", "many"}, "--nproc_per_node");
}

TEST_F(CliErrorTest, NprocPerNodeZero) {
  expect_usage_error({"--nproc_per_node", "0"}, "--nproc_per_node");
}

TEST_F(CliErrorTest, RedirectsOutOfRange) {
  expect_usage_error({"--redirects", "7"}, "--redirects");
}

TEST_F(CliErrorTest, RedirectsBadPerRankMap) {
  expect_usage_error({"--redirects", "0:x"}, "--redirects");
}

TEST_F(CliErrorTest, NnodesZero) { expect_usage_error({"--nnodes", "0"}, "--nnodes"); }

TEST_F(CliErrorTest, NnodesMinAboveMax) { expect_usage_error({"--nnodes", "3:2"}, "--nnodes"); }

TEST_F(CliErrorTest, StandaloneWithSeveralNodes) {
  expect_usage_error({"--standalone", "--nnodes", "2"}, "--nnodes");
}

TEST_F(CliErrorTest, BadPetEnvironmentDefault) {
  env_["PET_NPROC_PER_NODE"] = "-3";
  expect_usage_error({}, "nproc_per_node");
}

TEST_F(CliErrorTest, NoPythonExecutableMissing) {
  const RunResult run = run_ddprun({"--no_python", "/nonexistent/worker_binary"});
  EXPECT_TRUE(ExitedWith(run, 2));
  EXPECT_NE(run.err.find("/nonexistent/worker_binary"), std::string::npos) << run.err;
}

TEST_F(CliErrorTest, MissingEntryPoint) {
  const RunResult run = run_ddprun({"--nproc_per_node", "2"});
  EXPECT_TRUE(ExitedWith(run, 2));
  EXPECT_NE(run.err.find("entry point"), std::string::npos) << run.err;
}

// One rule for the exit code of a program that cannot start (common/exit_codes.h): 2 when
// what the user gave is wrong (a host name that does not resolve), 1 when the machine says no
// (a port already in use). The name below has a 64-character label, which the resolver refuses
// before sending any query.
TEST_F(CliErrorTest, AnUnresolvableMetricsAddressIsAUsageErrorAndABusyPortIsNot) {
  const std::string unresolvable = std::string(64, 'a') + ".test";
  const RunResult bad_name = run_ddprun(
      {"--metrics_addr", unresolvable, "--metrics_port", "0", "--no_python", "/bin/true"});
  EXPECT_TRUE(ExitedWith(bad_name, 2));
  EXPECT_NE(bad_name.err.find("cannot resolve"), std::string::npos) << bad_name.err;

  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor taken(
      io, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  const RunResult busy =
      run_ddprun({"--metrics_port", std::to_string(taken.local_endpoint().port()), "--no_python",
                  "/bin/true"});
  EXPECT_TRUE(ExitedWith(busy, 1));
  EXPECT_NE(busy.err.find("bind"), std::string::npos) << busy.err;
}

TEST_F(CliErrorTest, HelpExitsZero) {
  const RunResult run = run_ddprun({"--help"});
  EXPECT_TRUE(ExitedWith(run, 0));
  EXPECT_NE(run.out.find("--nproc_per_node"), std::string::npos) << run.out;
}

// A rendezvous host the resolver says does not exist is a typo: exit 2 at once, naming the flag
// (it was retried for join_timeout, 600 s). Names under .invalid never resolve (RFC 6761) and
// ddprun answers them itself, so no network is involved; the 30 s bound is far below any retry.
TEST_F(CliErrorTest, NoSuchRendezvousHostExitsTwoAtOnce) {
  const auto started = std::chrono::steady_clock::now();
  const RunResult run = run_ddprun({"--rdzv_backend", "c10d", "--rdzv_endpoint",
                                    "no-such-host.invalid:29400", "--no_python", "/bin/true"},
                                   std::chrono::seconds(30));
  EXPECT_TRUE(ExitedWith(run, 2)) << run.describe();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
  EXPECT_NE(run.err.find("--rdzv_endpoint no-such-host.invalid:29400: no such host "
                         "'no-such-host.invalid'"),
            std::string::npos)
      << run.err;
}

TEST_F(CliErrorTest, NoSuchStaticMasterAddrExitsTwo) {
  const RunResult run =
      run_ddprun({"--master_addr", "no-such-host.invalid", "--no_python", "/bin/true"},
                 std::chrono::seconds(30));
  EXPECT_TRUE(ExitedWith(run, 2)) << run.describe();
  EXPECT_NE(run.err.find("--master_addr no-such-host.invalid: no such host"), std::string::npos)
      << run.err;
}

TEST_F(CliErrorTest, AnOutOfRangeEndpointPortSaysSo) {
  expect_usage_error({"--rdzv_backend", "c10d", "--rdzv_endpoint", "head:70000"},
                     "--rdzv_endpoint: 'head:70000': port 70000 is out of range (0-65535)");
}

// argparse's rule, which torchrun users rely on: an unambiguous prefix is the flag.
TEST_F(CliErrorTest, AnUnambiguousPrefixOfAFlagIsAccepted) {
  const RunResult run = run_ddprun(
      {"--nproc_per_nod", "2", "--max-rest=0", worker("echo_args.py"), "--nproc_per_nod"});
  EXPECT_TRUE(ExitedWith(run, 0)) << run.describe();
  // Two workers ran, and the script's argument after its name reached it untouched.
  EXPECT_EQ(read_text_file(out("args_0.json")), R"(["--nproc_per_nod"])");
  EXPECT_EQ(read_text_file(out("args_1.json")), R"(["--nproc_per_nod"])");
}

TEST_F(CliErrorTest, AnAmbiguousPrefixListsTheCandidates) {
  expect_usage_error({"--rdzv", "c10d"},
                     "ambiguous option: --rdzv could match --rdzv_backend, "
                     "--rdzv_endpoint, --rdzv_id, --rdzv_conf");
}

TEST_F(CliErrorTest, AnUnknownFlagGetsADidYouMean) {
  expect_usage_error({"--nproc_per_nodes", "2"},
                     "unrecognized argument: --nproc_per_nodes (did you mean '--nproc_per_node'?)");
}

}  // namespace
}  // namespace ddprun::testing
