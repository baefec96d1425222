// The files TLS is configured from, for rendezvous connections.
//
//   server: its certificate chain and key; with client_ca_file, every client must present a
//           certificate signed by that CA (mutual TLS), else the handshake fails.
//   client: the CA that signed the server's certificate (always verified, host name included:
//           TLS that does not check who answers protects nothing); optionally its own
//           certificate and key for mutual TLS.
//
// TLS 1.2 is the oldest version either side accepts.
#pragma once

#include <string>

namespace ddprun::rdzv {

struct TlsServerFiles {
  std::string cert_file;       // PEM certificate chain, leaf first
  std::string key_file;        // PEM private key of the leaf
  std::string client_ca_file;  // "" = clients are not asked for certificates
};

struct TlsClientFiles {
  std::string ca_file;      // PEM CA bundle that verifies the server; required
  std::string cert_file;    // this client's certificate for mutual TLS ("" = none)
  std::string key_file;     // and its key (both or neither)
  std::string server_name;  // the name the server's certificate must carry; "" = the host dialled
};

}  // namespace ddprun::rdzv
