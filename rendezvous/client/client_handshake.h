// The client's opening of a rendezvous connection, once TCP is connected:
//
//   TLS handshake (when the credentials have TLS; the server's certificate and name checked)
//   → Hello{job, nonce when the client holds a token}
//   ← AuthChallenge{server nonce, server proof}  → AuthProof{client proof}   (token only)
//   ← HelloAck, or Error saying why not, or Redirect (a replica that does not lead)
//
// A refusal (wrong or missing token on either side, a certificate either side rejects, an
// unsupported protocol version) comes back with kind kRefused and a message that says what to
// fix; it is permanent, retrying cannot help. Anything else (the connection dropped, a timeout
// closing the stream) is worth another attempt. A Redirect comes back as kind kUnavailable
// with the Redirect in `*redirect` (when not null): connect there, or retry later when its host
// is empty.
//
// `ddp-rendezvous status` opens the same way with a StatusQuery in place of Hello (and its
// own flags named in the messages); the server's StatusReport takes HelloAck's place.
#pragma once

#include <optional>
#include <string>
#include <utility>  // before Boost 1.74's awaitable.hpp (see frame_io.h)

#include <boost/asio/awaitable.hpp>

#include "common/result.h"
#include "rendezvous/security/credentials.h"
#include "rendezvous/wire/codec.h"
#include "rendezvous/wire/stream.h"

namespace ddprun::rdzv {

// `server_name`: the name the server's certificate must carry (the host dialled, unless the
// credentials name another).
boost::asio::awaitable<Status> client_handshake(Stream& stream, const std::string& job_id,
                                                const ClientCredentials& credentials,
                                                const std::string& server_name,
                                                const CodecLimits& limits,
                                                std::optional<Redirect>* redirect = nullptr);

// The status query's opening and its answer. Errors as client_handshake's (a replica that
// does not lead: kUnavailable naming the leader, with the Redirect in `*redirect` when not
// null), kMalformed when the server answered with something else than a report.
// With `release_host` (`ddp-rendezvous release`), the query asks the server to release that
// host (protocol.md, "Status query"): an empty report when it did, kNotFound with the server's
// sentence when the host was not kept out.
boost::asio::awaitable<Result<StatusReport>> client_status_query(
    Stream& stream, const ClientCredentials& credentials, const std::string& server_name,
    const CodecLimits& limits, std::optional<Redirect>* redirect = nullptr,
    const std::string& release_host = {});

}  // namespace ddprun::rdzv
