// Certificates and token files for the security tests, made fresh in a private temp dir with
// the `openssl` command (Debian's openssl package): a CA, a server certificate for 127.0.0.1
// and localhost, a client certificate, and a second, unrelated CA with its own client
// certificate (what an impostor would have). EC P-256 keys: a few milliseconds each.
// The directory is removed when the TestPki is destroyed.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "tests/support/temp_dir.h"

namespace ddprun::rdzv::testing {

class TestPki {
 public:
  TestPki() {
    write(dir_ + "/ext.cnf",
          "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
          "extendedKeyUsage=serverAuth,clientAuth\n");
    make_ca("ca");
    make_ca("rogue-ca");
    make_leaf("server", "ca", "localhost");
    make_leaf("client", "ca", "ddprun-node");
    make_leaf("rogue-client", "rogue-ca", "ddprun-node");
  }
  TestPki(const TestPki&) = delete;
  TestPki& operator=(const TestPki&) = delete;

  const std::string& dir() const { return dir_; }
  std::string cert(const std::string& name) const { return dir_ + "/" + name + ".pem"; }
  std::string key(const std::string& name) const { return dir_ + "/" + name + ".key"; }

  // A token file with `secret` and permissions `mode`.
  std::string token(const std::string& name, const std::string& secret, mode_t mode = 0600) const {
    const std::string path = dir_ + "/" + name + ".token";
    write(path, secret + "\n");
    ::chmod(path.c_str(), mode);
    return path;
  }

 private:
  static void write(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
  }
  void run(const std::string& command) const {
    const std::string quiet = "cd '" + dir_ + "' && " + command + " >/dev/null 2>&1";
    if (std::system(quiet.c_str()) != 0) throw std::runtime_error("failed: " + command);
  }
  void make_ca(const std::string& name) const {
    run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " +
        name + ".key -out " + name + ".pem -days 2 -subj /CN=" + name);
  }
  void make_leaf(const std::string& name, const std::string& ca, const std::string& cn) const {
    run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + name +
        ".key -out " + name + ".csr -subj /CN=" + cn);
    run("openssl x509 -req -in " + name + ".csr -CA " + ca + ".pem -CAkey " + ca +
        ".key -CAcreateserial -out " + name + ".pem -days 2 -extfile ext.cnf");
    ::chmod(key(name).c_str(), 0600);
  }

  ddprun::testing::TempDir temp_;  // tests/support
  std::string dir_ = temp_.path();
};

}  // namespace ddprun::rdzv::testing
