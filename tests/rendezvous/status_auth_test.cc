// Status queries against servers that authenticate (server_handshake.h): the daemon-wide token
// guards them like a Hello; a server with per-job tokens only refuses them; TLS and mutual TLS
// as for agents. A real in-process server on loopback, queried through query_status. Every
// refusal says why on the client side and is counted in rejected_auth.
#include <thread>

#include <boost/asio/ip/tcp.hpp>

#include "rendezvous/daemon/status_client.h"
#include "rendezvous/security/credentials.h"
#include "tests/rendezvous/rdzv_test_util.h"
#include "tests/rendezvous/test_pki.h"

namespace ddprun::rdzv::testing {
namespace {

const std::string kStatusToken = "0123456789abcdef0123456789abcdef";
const std::string kWrongStatusToken = "fedcba9876543210fedcba9876543210";

bool says(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class StatusAuthTest : public ::testing::Test {
 protected:
  std::unique_ptr<ServerThread> start_server(const ServerCredentialFiles& files) {
    ServerOptions options = ServerThread::test_options();
    auto credentials = load_server_credentials(files);
    EXPECT_TRUE(credentials.ok()) << credentials.error_message();
    if (credentials.ok()) options.credentials = *credentials;
    return std::make_unique<ServerThread>(options);
  }
  // Queries with `token` ("" = none) and TLS from `conf` (its tls_* keys).
  Result<StatusReport> query(uint16_t port, const std::string& token, RendezvousConf conf = {}) {
    if (!token.empty()) conf.token_file = pki_.token("status-" + token.substr(0, 4), token);
    auto credentials = load_client_credentials(conf);
    EXPECT_TRUE(credentials.ok()) << credentials.error_message();
    StatusQueryOptions options;
    options.port = port;
    if (credentials.ok()) options.credentials = std::move(*credentials);
    auto answer = query_status(options);
    if (!answer) return answer.status();
    return std::move(answer->report);
  }
  // The server's count of authentication failures once it reaches `expected` (bounded poll:
  // a TLS failure is counted after the client has seen it).
  uint64_t rejected_auth(ServerThread& server, uint64_t expected) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    uint64_t n = server.stats().totals.rejected_auth;
    while (n < expected && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
      n = server.stats().totals.rejected_auth;
    }
    return n;
  }

  TestPki pki_;
};

TEST_F(StatusAuthTest, TheDaemonTokenGuardsStatusQueries) {
  ServerCredentialFiles files;
  files.token_file = pki_.token("server", kStatusToken);
  auto server = start_server(files);

  auto anonymous = query(server->port(), "");
  ASSERT_FALSE(anonymous.ok());
  EXPECT_TRUE(anonymous.status().is_refused()) << anonymous.error_message();
  EXPECT_TRUE(says(anonymous.error_message(), "authentication failed for the status query"))
      << anonymous.error_message();
  EXPECT_TRUE(says(anonymous.error_message(), "--token-file")) << anonymous.error_message();

  auto wrong = query(server->port(), kWrongStatusToken);
  ASSERT_FALSE(wrong.ok());
  EXPECT_TRUE(wrong.status().is_refused()) << wrong.error_message();
  EXPECT_TRUE(says(wrong.error_message(), "different tokens")) << wrong.error_message();

  auto report = query(server->port(), kStatusToken);
  ASSERT_TRUE(report.ok()) << report.error_message();
  EXPECT_TRUE(report->jobs.empty());
  EXPECT_EQ(rejected_auth(*server, 2), 2u);
  EXPECT_EQ(server->stats().jobs, 0u) << "no status query opens a job";
}

TEST_F(StatusAuthTest, PerJobTokensOnlyRefuseStatusQueriesSayingWhy) {
  ServerCredentialFiles files;
  files.job_token_files["blue"] = pki_.token("blue", kStatusToken);
  auto server = start_server(files);
  for (const std::string& token : {std::string(), kStatusToken}) {
    auto report = query(server->port(), token);
    ASSERT_FALSE(report.ok());
    EXPECT_TRUE(report.status().is_refused()) << report.error_message();
    EXPECT_TRUE(says(report.error_message(),
                     "this server has per-job tokens only; give it --token-file for status "
                     "queries"))
        << report.error_message();
  }
  EXPECT_EQ(rejected_auth(*server, 2), 2u);
}

TEST_F(StatusAuthTest, AClientWithATokenRefusesAServerThatCannotProveOne) {
  auto server = start_server({});
  auto report = query(server->port(), kStatusToken);
  ASSERT_FALSE(report.ok());
  EXPECT_TRUE(report.status().is_refused()) << report.error_message();
  EXPECT_TRUE(says(report.error_message(), "cannot prove")) << report.error_message();
  EXPECT_TRUE(query(server->port(), "").ok()) << "an open server answers at once";
}

TEST_F(StatusAuthTest, MutualTlsStatusQueriesNeedTheClientCertificate) {
  ServerCredentialFiles files;
  files.token_file = pki_.token("server", kStatusToken);
  files.tls = TlsServerFiles{pki_.cert("server"), pki_.key("server"), pki_.cert("ca")};
  auto server = start_server(files);

  RendezvousConf tls;
  tls.tls_ca_file = pki_.cert("ca");
  tls.tls_cert_file = pki_.cert("client");
  tls.tls_key_file = pki_.key("client");
  auto report = query(server->port(), kStatusToken, tls);
  ASSERT_TRUE(report.ok()) << report.error_message();

  RendezvousConf no_cert;
  no_cert.tls_ca_file = pki_.cert("ca");
  auto anonymous = query(server->port(), kStatusToken, no_cert);
  ASSERT_FALSE(anonymous.ok());
  EXPECT_TRUE(anonymous.status().is_refused()) << anonymous.error_message();
  EXPECT_TRUE(says(anonymous.error_message(), "authentication failed for the status query"))
      << anonymous.error_message();

  auto plain = query(server->port(), kStatusToken);
  ASSERT_FALSE(plain.ok());
  EXPECT_TRUE(says(plain.error_message(), "requires TLS")) << plain.error_message();
  EXPECT_EQ(rejected_auth(*server, 2), 2u);
}

// A server that accepts (the kernel's backlog does) and never answers: the query ends at its
// timeout, in a TLS handshake too, and says so.
TEST_F(StatusAuthTest, ASilentServerIsATimeoutInTlsToo) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor silent(
      io, {boost::asio::ip::make_address("127.0.0.1"), 0});  // listens; never accepts
  RendezvousConf tls;
  tls.tls_ca_file = pki_.cert("ca");
  for (const RendezvousConf& conf : {RendezvousConf{}, tls}) {
    auto credentials = load_client_credentials(conf);
    ASSERT_TRUE(credentials.ok()) << credentials.error_message();
    StatusQueryOptions options;
    options.port = silent.local_endpoint().port();
    options.timeout = Millis(300);
    options.credentials = std::move(*credentials);
    auto report = query_status(options);
    ASSERT_FALSE(report.ok());
    EXPECT_TRUE(report.status().is_timed_out()) << report.error_message();
    EXPECT_TRUE(says(report.error_message(), "no status report within 300 ms"))
        << report.error_message();
  }
}

}  // namespace
}  // namespace ddprun::rdzv::testing
