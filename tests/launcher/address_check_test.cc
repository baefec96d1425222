// Host names checked before a job starts (launcher/address_check.h): an authoritative "no such
// host" is the user's typo, a resolver that does not answer is retried. A fake lookup stands
// for the resolver; the one real lookup is of a .invalid name, answered without a network.
#include "launcher/address_check.h"

#include <netdb.h>

#include <gtest/gtest.h>

namespace ddprun::launcher {
namespace {

LaunchConfig c10d_job(const std::string& host) {
  LaunchConfig config;
  config.rendezvous.backend = RendezvousBackend::kC10d;
  config.rendezvous.endpoint_host = host;
  config.rendezvous.endpoint_port = 29400;
  return config;
}

TEST(AddressCheckTest, TheResolversAnswerAsAKind) {
  EXPECT_TRUE(host_lookup_status("h", 0).ok());
  const Status none = host_lookup_status("h", EAI_NONAME);
  EXPECT_TRUE(none.is_invalid_argument());
  EXPECT_NE(none.message().find("no such host 'h'"), std::string::npos) << none.message();
  const Status again = host_lookup_status("h", EAI_AGAIN);
  EXPECT_TRUE(again.is_unavailable());
  EXPECT_NE(again.message().find("did not answer"), std::string::npos) << again.message();
  EXPECT_TRUE(host_lookup_status("h", EAI_FAIL).is_unavailable());
}

TEST(AddressCheckTest, InvalidNamesNeverResolveAndNeedNoNetwork) {
  EXPECT_EQ(system_host_lookup("no-such-host.invalid"), EAI_NONAME);
  EXPECT_EQ(system_host_lookup("x.INVALID."), EAI_NONAME);
  EXPECT_EQ(system_host_lookup("127.0.0.1"), 0);
  EXPECT_EQ(system_host_lookup("::1"), 0);
}

TEST(AddressCheckTest, AnUnknownRendezvousHostNamesTheFlag) {
  LaunchConfig config = c10d_job("head");
  config.rendezvous.more_endpoints = {{"typo", 29401}};
  auto lookup = [](const std::string& host) { return host == "typo" ? EAI_NONAME : 0; };
  const Status s = check_job_hosts(config, lookup);
  EXPECT_TRUE(s.is_invalid_argument());
  EXPECT_EQ(s.message(),
            "--rdzv_endpoint head:29400,typo:29401: no such host 'typo' (the resolver says it "
            "does not exist): check the name");
}

TEST(AddressCheckTest, AResolverThatDoesNotAnswerIsRetriedLater) {
  auto lookup = [](const std::string&) { return EAI_AGAIN; };
  EXPECT_TRUE(check_job_hosts(c10d_job("head"), lookup).ok());
}

TEST(AddressCheckTest, AStaticJobChecksMasterAddrAndStandaloneNothing) {
  LaunchConfig config;
  config.rendezvous.backend = RendezvousBackend::kStatic;
  config.rendezvous.master_addr = "nowhere";
  auto none = [](const std::string&) { return EAI_NONAME; };
  const Status s = check_job_hosts(config, none);
  EXPECT_TRUE(s.is_invalid_argument());
  EXPECT_EQ(s.message().rfind("--master_addr nowhere: no such host", 0), 0u) << s.message();
  LaunchConfig standalone = c10d_job("127.0.0.1");
  standalone.rendezvous.standalone = true;
  EXPECT_TRUE(check_job_hosts(standalone, none).ok());
}

}  // namespace
}  // namespace ddprun::launcher
