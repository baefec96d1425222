// SystemdNotifier over libsystemd against a real unix datagram socket in a temp dir, as systemd
// would listen: what arrives, and which environment enables the watchdog.
#include "common/systemd_notifier.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "common/posix_fd.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

// Sets (or unsets) variables for one test and restores them after.
class ScopedEnv {
 public:
  void set(const char* key, const char* value) {
    const char* old = std::getenv(key);
    saved_.emplace_back(key, old ? std::optional<std::string>(old) : std::nullopt);
    if (value) {
      ::setenv(key, value, 1);
    } else {
      ::unsetenv(key);
    }
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        ::unsetenv(it->first.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

class SystemdNotifierTest : public ::testing::Test {
 protected:
  ddprun::testing::TempDir temp_;  // tests/support
  void SetUp() override {
    dir_ = temp_.path();
    path_ = dir_ + "/notify.sock";
    socket_ = UniqueFd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    ASSERT_TRUE(socket_.valid());
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path_.c_str());
    ASSERT_EQ(::bind(socket_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  }

  // The next datagram, or nullopt after 5 s.
  std::optional<std::string> receive() {
    pollfd p{socket_.get(), POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1) return std::nullopt;
    char buffer[4096];
    const ssize_t n = ::recv(socket_.get(), buffer, sizeof buffer, 0);
    if (n < 0) return std::nullopt;
    return std::string(buffer, n);
  }

  std::string dir_;
  std::string path_;
  UniqueFd socket_;
};

TEST_F(SystemdNotifierTest, MessagesReachTheSocketNamedByNotifySocket) {
  ScopedEnv env;
  env.set("NOTIFY_SOCKET", path_.c_str());
  auto notifier = make_service_notifier();
  ASSERT_TRUE(notifier->active());
  notifier->ready("listening on 127.0.0.1:1");
  notifier->watchdog();
  notifier->stopping();
  EXPECT_EQ(receive(), "READY=1\nSTATUS=listening on 127.0.0.1:1");
  EXPECT_EQ(receive(), "WATCHDOG=1");
  EXPECT_EQ(receive(), "STOPPING=1");
  // The variable stays for later messages (and is stripped from workers elsewhere).
  EXPECT_STREQ(std::getenv("NOTIFY_SOCKET"), path_.c_str());
}

TEST_F(SystemdNotifierTest, WithoutNotifySocketTheNotifierIsTheNullOne) {
  ScopedEnv env;
  env.set("NOTIFY_SOCKET", nullptr);
  env.set("WATCHDOG_USEC", "1000000");
  auto notifier = make_service_notifier();
  EXPECT_FALSE(notifier->active());
  EXPECT_FALSE(notifier->watchdog_timeout());
}

TEST_F(SystemdNotifierTest, TheWatchdogIsThisProcesssOnly) {
  ScopedEnv env;
  env.set("NOTIFY_SOCKET", path_.c_str());
  env.set("WATCHDOG_USEC", "3000000");
  env.set("WATCHDOG_PID", nullptr);
  auto loaded = SystemdNotifier::load();
  ASSERT_TRUE(loaded) << loaded.error_message();
  SystemdNotifier& notifier = **loaded;
  EXPECT_EQ(notifier.watchdog_timeout(), std::chrono::microseconds(3000000));
  const std::string own = std::to_string(::getpid());
  env.set("WATCHDOG_PID", own.c_str());
  EXPECT_EQ(notifier.watchdog_timeout(), std::chrono::microseconds(3000000));
  // Meant for another process (e.g. the parent that exec'd us without clearing it).
  const std::string other = std::to_string(::getpid() + 1);
  env.set("WATCHDOG_PID", other.c_str());
  EXPECT_FALSE(notifier.watchdog_timeout());
  env.set("WATCHDOG_PID", nullptr);
  env.set("WATCHDOG_USEC", "not-a-number");
  EXPECT_FALSE(notifier.watchdog_timeout());
}

TEST_F(SystemdNotifierTest, ALibraryThatCannotBeLoadedIsAnErrorNamingIt) {
  auto missing = SystemdNotifier::load("libddprun-no-such-library.so.0");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error_message().find("cannot load libddprun-no-such-library.so.0"),
            std::string::npos)
      << missing.error_message();
  // A library that loads but is not libsystemd (libc lacks sd_notify).
  auto wrong = SystemdNotifier::load("libc.so.6");
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error_message().find("libc.so.6 lacks sd_notify"), std::string::npos)
      << wrong.error_message();
}

}  // namespace
}  // namespace ddprun
