// The pieces of rendezvous authentication on their own: token files (what is refused, and
// how it is said), the challenge's proofs, the server's handshake state machine, and the
// --rdzv_conf security keys.
#include <gtest/gtest.h>

#include "rendezvous/conf/rdzv_conf.h"
#include "rendezvous/security/challenge.h"
#include "rendezvous/security/credentials.h"
#include "rendezvous/security/token_file.h"
#include "rendezvous/server/server_handshake.h"
#include "tests/rendezvous/test_pki.h"

namespace ddprun::rdzv::testing {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class TokenFileTest : public ::testing::Test {
 protected:
  TestPki pki_;
};

TEST_F(TokenFileTest, APrivateFileLoadsWithoutItsTrailingNewline) {
  auto secret = load_token_file(pki_.token("good", "0123456789abcdef0123456789abcdef"));
  ASSERT_TRUE(secret.ok()) << secret.error_message();
  EXPECT_EQ(secret->bytes().size(), 32u);
}

TEST_F(TokenFileTest, AFileOthersCanReadIsRefusedWithTheFix) {
  const std::string path = pki_.token("open", "0123456789abcdef0123456789abcdef", 0644);
  auto secret = load_token_file(path);
  ASSERT_FALSE(secret.ok());
  EXPECT_TRUE(secret.status().is_refused());
  EXPECT_TRUE(contains(secret.error_message(), path)) << secret.error_message();
  EXPECT_TRUE(contains(secret.error_message(), "chmod 600 " + path)) << secret.error_message();
  EXPECT_FALSE(load_token_file(pki_.token("group", "0123456789abcdef0123456789abcdef", 0640)).ok());
}

TEST_F(TokenFileTest, ShortEmptyAndMissingFilesAreRefusedByName) {
  auto short_one = load_token_file(pki_.token("short", "tooshort"));
  ASSERT_FALSE(short_one.ok());
  EXPECT_TRUE(contains(short_one.error_message(), "16")) << short_one.error_message();
  auto empty = load_token_file(pki_.token("empty", "   "));
  ASSERT_FALSE(empty.ok());
  EXPECT_TRUE(contains(empty.error_message(), "empty")) << empty.error_message();
  auto missing = load_token_file(pki_.dir() + "/nope.token");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(contains(missing.error_message(), "nope.token")) << missing.error_message();
  auto directory = load_token_file(pki_.dir());
  EXPECT_FALSE(directory.ok());
}

Secret secret_of(const std::string& text) {
  return Secret(std::vector<uint8_t>(text.begin(), text.end()));
}

TEST(ChallengeTest, ProofsBindTheSecretTheJobBothNoncesAndTheDirection) {
  const Secret a = secret_of("secret-a-0123456789"), b = secret_of("secret-b-0123456789");
  const std::string nc(kNonceBytes, 'c'), ns(kNonceBytes, 's');
  const std::string proof = server_proof(a, "job", nc, ns);
  EXPECT_EQ(proof.size(), kProofBytes);
  EXPECT_TRUE(proofs_equal(proof, server_proof(a, "job", nc, ns)));
  EXPECT_FALSE(proofs_equal(proof, server_proof(b, "job", nc, ns)));
  EXPECT_FALSE(proofs_equal(proof, server_proof(a, "other", nc, ns)));
  EXPECT_FALSE(proofs_equal(proof, server_proof(a, "job", ns, nc)));
  // A server's proof is never a valid client proof (no reflection).
  EXPECT_FALSE(proofs_equal(proof, client_proof(a, "job", nc, ns)));
  EXPECT_FALSE(proofs_equal(proof, proof.substr(1)));
  auto n1 = random_nonce(), n2 = random_nonce();
  ASSERT_TRUE(n1.ok() && n2.ok());
  EXPECT_EQ(n1->size(), kNonceBytes);
  EXPECT_NE(*n1, *n2);
}

std::shared_ptr<const ServerCredentials> token_for_job(const std::string& job, Secret token) {
  std::map<std::string, Secret> tokens;
  tokens.emplace(job, std::move(token));
  return std::make_shared<ServerCredentials>(Secret(), std::move(tokens), nullptr);
}

TEST(ServerHandshakeTest, AJobWithoutTokenIsAcceptedAtHello) {
  ServerHandshake handshake(token_for_job("secured", secret_of("0123456789abcdef")), "1.2.3.4:5");
  auto step = handshake.on_frame(Hello{kProtocolMagic, kProtocolVersion, "open", ""});
  EXPECT_TRUE(step.refusal.ok());
  EXPECT_EQ(step.accepted_job, "open");
}

TEST(ServerHandshakeTest, TheRightProofIsAcceptedAndTheServerProvesItselfFirst) {
  const Secret token = secret_of("0123456789abcdef");
  ServerHandshake handshake(token_for_job("job", token), "127.0.0.9:4242");
  const std::string nc(kNonceBytes, 'n');
  auto challenge = handshake.on_frame(Hello{kProtocolMagic, kProtocolVersion, "job", nc});
  ASSERT_TRUE(challenge.challenge.has_value());
  EXPECT_TRUE(challenge.accepted_job.empty());
  const AuthChallenge& c = *challenge.challenge;
  EXPECT_TRUE(proofs_equal(server_proof(token, "job", nc, c.server_nonce), c.server_proof));
  auto done = handshake.on_frame(AuthProofMsg{client_proof(token, "job", nc, c.server_nonce)});
  EXPECT_TRUE(done.refusal.ok()) << done.refusal.message();
  EXPECT_EQ(done.accepted_job, "job");
}

TEST(ServerHandshakeTest, AWrongMissingOrEmptyProofIsAnAuthenticationFailureNamingJobAndPeer) {
  const Secret token = secret_of("0123456789abcdef");
  const std::string nc(kNonceBytes, 'n');
  {
    ServerHandshake handshake(token_for_job("job", token), "127.0.0.9:4242");
    auto none = handshake.on_frame(Hello{kProtocolMagic, kProtocolVersion, "job", ""});
    EXPECT_TRUE(none.authentication_failed);
    EXPECT_TRUE(
        contains(none.refusal.message(), "authentication failed for job job from 127.0.0.9:4242"))
        << none.refusal.message();
    EXPECT_TRUE(contains(none.refusal.message(), "token_file")) << none.refusal.message();
  }
  {
    ServerHandshake handshake(token_for_job("job", token), "127.0.0.9:4242");
    auto c = handshake.on_frame(Hello{kProtocolMagic, kProtocolVersion, "job", nc});
    ASSERT_TRUE(c.challenge);
    auto wrong = handshake.on_frame(AuthProofMsg{
        client_proof(secret_of("another-token-0123"), "job", nc, c.challenge->server_nonce)});
    EXPECT_TRUE(wrong.authentication_failed);
    EXPECT_TRUE(contains(wrong.refusal.message(), "wrong token")) << wrong.refusal.message();
  }
  {
    ServerHandshake handshake(token_for_job("job", token), "127.0.0.9:4242");
    ASSERT_TRUE(handshake.on_frame(Hello{kProtocolMagic, kProtocolVersion, "job", nc}).challenge);
    auto empty = handshake.on_frame(AuthProofMsg{});
    EXPECT_TRUE(empty.authentication_failed);
    EXPECT_TRUE(contains(empty.refusal.message(), "different tokens")) << empty.refusal.message();
  }
  {
    ServerHandshake handshake(token_for_job("job", token), "127.0.0.9:4242");
    ASSERT_TRUE(handshake.on_frame(Hello{kProtocolMagic, kProtocolVersion, "job", nc}).challenge);
    auto skipped = handshake.on_frame(HeartbeatMsg{});
    EXPECT_FALSE(skipped.refusal.ok());
    EXPECT_TRUE(skipped.refusal.is_malformed());
  }
}

// A status query proves the daemon-wide token, bound to no job: its proofs open no job, and a
// job's proofs do not answer it.
TEST(ServerHandshakeTest, AStatusQueryProvesTheDaemonTokenBoundToNoJob) {
  const Secret token = secret_of("0123456789abcdef");
  auto daemon =
      std::make_shared<ServerCredentials>(token, std::map<std::string, Secret>{}, nullptr);
  const std::string nc(kNonceBytes, 'n');
  {
    ServerHandshake handshake(daemon, "127.0.0.9:4242");
    auto c = handshake.on_frame(StatusQuery{kProtocolMagic, kProtocolVersion, nc});
    ASSERT_TRUE(c.challenge);
    EXPECT_TRUE(proofs_equal(server_proof(token, "", nc, c.challenge->server_nonce),
                             c.challenge->server_proof));
    auto done =
        handshake.on_frame(AuthProofMsg{client_proof(token, "", nc, c.challenge->server_nonce)});
    EXPECT_TRUE(done.refusal.ok()) << done.refusal.message();
    EXPECT_TRUE(done.accepted_status_query);
    EXPECT_TRUE(done.accepted_job.empty());
  }
  {
    ServerHandshake handshake(daemon, "127.0.0.9:4242");
    auto c = handshake.on_frame(StatusQuery{kProtocolMagic, kProtocolVersion, nc});
    ASSERT_TRUE(c.challenge);
    auto job_proof =
        handshake.on_frame(AuthProofMsg{client_proof(token, "job", nc, c.challenge->server_nonce)});
    EXPECT_TRUE(job_proof.authentication_failed);
    EXPECT_FALSE(job_proof.accepted_status_query);
    EXPECT_TRUE(contains(job_proof.refusal.message(),
                         "authentication failed for the status query from 127.0.0.9:4242"))
        << job_proof.refusal.message();
  }
  {
    ServerHandshake handshake(daemon, "127.0.0.9:4242");
    auto none = handshake.on_frame(StatusQuery{});
    EXPECT_TRUE(none.authentication_failed);
    EXPECT_TRUE(contains(none.refusal.message(), "--token-file")) << none.refusal.message();
  }
  ServerHandshake open(nullptr, "127.0.0.9:4242");
  EXPECT_TRUE(open.on_frame(StatusQuery{}).accepted_status_query);
  ServerHandshake per_job(token_for_job("job", token), "127.0.0.9:4242");
  auto refused = per_job.on_frame(StatusQuery{kProtocolMagic, kProtocolVersion, nc});
  EXPECT_TRUE(refused.authentication_failed);
  EXPECT_TRUE(contains(refused.refusal.message(), "per-job tokens only"))
      << refused.refusal.message();
}

TEST(RdzvConfSecurityTest, KeysAreParsedAndInconsistentOnesRefused) {
  auto conf = parse_rdzv_conf(
      "token_file=/etc/ddprun/job.token,tls_ca_file=/ca.pem,tls_cert_file=/c.pem,"
      "tls_key_file=/c.key,tls_server_name=head");
  ASSERT_TRUE(conf.ok()) << conf.error_message();
  EXPECT_EQ(conf->token_file, "/etc/ddprun/job.token");
  EXPECT_EQ(conf->tls_server_name, "head");
  EXPECT_TRUE(conf->ignored_keys.empty());
  auto lonely_cert = parse_rdzv_conf("tls_ca_file=/ca.pem,tls_cert_file=/c.pem");
  ASSERT_FALSE(lonely_cert.ok());
  EXPECT_TRUE(contains(lonely_cert.error_message(), "tls_key_file"));
  auto no_ca = parse_rdzv_conf("tls_cert_file=/c.pem,tls_key_file=/c.key");
  ASSERT_FALSE(no_ca.ok());
  EXPECT_TRUE(contains(no_ca.error_message(), "tls_ca_file"));
  EXPECT_FALSE(parse_rdzv_conf("token_file=").ok());
}

TEST(CredentialsTest, FilesThatDoNotLoadAreNamed) {
  TestPki pki;
  RendezvousConf conf;
  conf.tls_ca_file = pki.dir() + "/missing-ca.pem";
  auto client = load_client_credentials(conf);
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(contains(client.error_message(), "missing-ca.pem")) << client.error_message();
  ServerCredentialFiles files;
  files.tls = TlsServerFiles{pki.cert("server"), pki.key("client"), ""};  // key of another cert
  auto server = load_server_credentials(files);
  ASSERT_FALSE(server.ok());
  EXPECT_TRUE(contains(server.error_message(), "client.key")) << server.error_message();
  files.tls = TlsServerFiles{pki.cert("server"), pki.key("server"), pki.cert("ca")};
  files.job_token_files["j"] = pki.token("j", "0123456789abcdef0123", 0604);
  auto refused = load_server_credentials(files);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.error_message(), "job 'j'")) << refused.error_message();
}

}  // namespace
}  // namespace ddprun::rdzv::testing
