#include "rendezvous/client/client_handshake.h"

#include <fmt/format.h>

#include "rendezvous/security/challenge.h"
#include "rendezvous/wire/frame_io.h"
#include "rendezvous/wire/server_address.h"

namespace ddprun::rdzv {
namespace {

// What the connection opens with, and how messages name it and the settings to check.
struct Opening {
  std::string job_id;        // Hello for this job; empty: a StatusQuery
  std::string release_host;  // a StatusQuery's StatusQuery::release_host
  bool status_query() const { return job_id.empty(); }
  std::string subject() const { return status_query() ? "the status query" : "job " + job_id; }
  // The settings, as the agent (--rdzv_conf) or ddp-rendezvous status names them.
  const char* token() const { return status_query() ? "--token-file" : "--rdzv_conf token_file"; }
  const char* tls_ca() const { return status_query() ? "--tls-ca" : "--rdzv_conf tls_ca_file"; }
  const char* tls_cert_key() const {
    return status_query() ? "--tls-cert and --tls-key"
                          : "--rdzv_conf tls_cert_file and tls_key_file";
  }
  const char* tls_all() const {
    return status_query() ? "--tls-ca, --tls-cert, --tls-server-name"
                          : "--rdzv_conf tls_ca_file, tls_cert_file, tls_server_name";
  }
};

asio::awaitable<Status> send(Stream& stream, const ClientMessage& message) {
  const std::string frame = encode_frame(message);
  std::vector<asio::const_buffer> buffers;
  buffers.push_back(asio::buffer(frame));
  boost::system::error_code ec;
  co_await stream.write(buffers, ec);
  if (ec) co_return Status::closed("handshake: " + ec.message());
  co_return Status();
}

asio::awaitable<Result<ServerMessage>> receive(Stream& stream, const Opening& opening,
                                               const CodecLimits& limits) {
  std::vector<uint8_t> body;
  Status read = co_await read_frame(stream, limits, body);
  if (read.is_refused()) {  // a TLS alert: the server refused this node's certificate
    co_return Status::refused(
        fmt::format("authentication failed for {}: the server refused this node's TLS certificate "
                    "({}); check {}, and that the server trusts the CA that signed them",
                    opening.subject(), read.message(), opening.tls_cert_key()));
  }
  if (read.is_malformed()) {
    co_return Status::refused(
        fmt::format("handshake: the server's answer is not a rendezvous frame; is this a ddprun "
                    "rendezvous endpoint, and does it serve TLS (then set {})?",
                    opening.tls_ca()));
  }
  if (!read) co_return read.with_context("handshake");
  auto reply = decode_server_message(body, limits);
  if (!reply) {
    co_return Status::refused("handshake: " + reply.status().message() +
                              "; is this a ddprun rendezvous endpoint?");
  }
  co_return reply;
}

Status refused_by_server(const ErrorMsg& error) {
  return Status::refused("server refused the handshake: " + error.message);
}

// The server proved nothing: it has no token for this job while this node has one.
Status unproven_server(const Opening& opening) {
  return Status::refused(fmt::format(
      "authentication failed for {}: this node has a token ({}) but the server has none for "
      "{}, so it cannot prove it is the real server; give the server the same token "
      "(ddp-rendezvous --token-file, or tokens: in its config)",
      opening.subject(), opening.token(), opening.status_query() ? "status queries" : "the job"));
}

// The challenge-response proper, after the server's AuthChallenge.
asio::awaitable<Status> answer_challenge(Stream& stream, const AuthChallenge& challenge,
                                         const Opening& opening, const Secret& token,
                                         const std::string& client_nonce) {
  const std::string& job_id = opening.job_id;  // a status query's proofs bind an empty job id
  const std::string expected = server_proof(token, job_id, client_nonce, challenge.server_nonce);
  if (challenge.server_nonce.size() != kNonceBytes ||
      !proofs_equal(expected, challenge.server_proof)) {
    // Tell the server, so that it logs the failure as one too, then give up.
    const ClientMessage refusal = AuthProofMsg{};  // named: GCC 12 mishandles temporaries here
    [[maybe_unused]] const Status told = co_await send(stream, refusal);  // best effort
    co_return Status::refused(
        fmt::format("authentication failed for {}: the server's proof does not match this node's "
                    "token; the server and this node hold different tokens (check {} here and the "
                    "server's --token-file)",
                    opening.subject(), opening.token()));
  }
  const ClientMessage proof =
      AuthProofMsg{client_proof(token, job_id, client_nonce, challenge.server_nonce)};
  co_return co_await send(stream, proof);
}

ClientMessage opening_frame(const Opening& opening, const std::string& nonce) {
  if (opening.status_query()) {
    return StatusQuery{kProtocolMagic, kProtocolVersion, nonce, opening.release_host};
  }
  return Hello{kProtocolMagic, kProtocolVersion, opening.job_id, nonce};
}

// TLS, the opening frame and, with a token, the challenge-response. Returns the server's
// answer after it: HelloAck (or the StatusReport), or whatever else it sent.
asio::awaitable<Result<ServerMessage>> open_connection(Stream& stream, const Opening& opening,
                                                       const ClientCredentials& credentials,
                                                       const std::string& server_name,
                                                       const CodecLimits& limits) {
  Status tls = co_await stream.handshake(Stream::Role::kClient, server_name);
  if (!tls) {
    co_return tls.is_refused()
        ? Status::refused(fmt::format("authentication failed for {}: {} (check {})",
                                      opening.subject(), tls.message(), opening.tls_all()))
        : tls;
  }
  const bool has_token = !credentials.token.empty();
  std::string nonce;
  if (has_token) {
    auto fresh = random_nonce();
    if (!fresh) co_return fresh.status();
    nonce = std::move(*fresh);
  }
  const ClientMessage first = opening_frame(opening, nonce);
  if (Status s = co_await send(stream, first); !s) co_return s;
  auto reply = co_await receive(stream, opening, limits);
  if (!reply) co_return reply.status();
  if (const auto* challenge = std::get_if<AuthChallenge>(&*reply); challenge && has_token) {
    Status answered =
        co_await answer_challenge(stream, *challenge, opening, credentials.token, nonce);
    if (!answered) co_return answered;
    reply = co_await receive(stream, opening, limits);
  } else if (has_token && (std::holds_alternative<HelloAck>(*reply) ||
                           std::holds_alternative<StatusReport>(*reply))) {
    co_return unproven_server(opening);
  }
  if (reply) {
    if (const auto* error = std::get_if<ErrorMsg>(&*reply)) co_return refused_by_server(*error);
  }
  co_return reply;
}

// A replica that does not lead answered with where the leader is.
Status redirected(const Redirect& to) {
  return Status::unavailable(
      to.host.empty() ? std::string("this replica does not lead and no replica leads right now")
                      : "this replica does not lead; the leader is " +
                            to_string(ServerAddress{to.host, to.port}));
}

}  // namespace

asio::awaitable<Status> client_handshake(Stream& stream, const std::string& job_id,
                                         const ClientCredentials& credentials,
                                         const std::string& server_name, const CodecLimits& limits,
                                         std::optional<Redirect>* redirect) {
  const Opening opening{job_id, {}};  // named: GCC 12 mishandles temporaries in co_await
  auto reply = co_await open_connection(stream, opening, credentials, server_name, limits);
  if (!reply) co_return reply.status();
  if (std::holds_alternative<HelloAck>(*reply)) co_return Status();
  if (const auto* to = std::get_if<Redirect>(&*reply)) {
    if (redirect) *redirect = *to;
    co_return redirected(*to);
  }
  co_return Status::refused(
      "handshake: the server did not answer with HelloAck; is this a ddprun rendezvous "
      "endpoint?");
}

asio::awaitable<Result<StatusReport>> client_status_query(
    Stream& stream, const ClientCredentials& credentials, const std::string& server_name,
    const CodecLimits& limits, std::optional<Redirect>* redirect, const std::string& release_host) {
  // Named: GCC 12 mishandles temporaries in co_await.
  const Opening opening{std::string(), release_host};
  auto reply = co_await open_connection(stream, opening, credentials, server_name, limits);
  if (!reply) co_return reply.status();
  if (auto* report = std::get_if<StatusReport>(&*reply)) co_return std::move(*report);
  if (const auto* answer = std::get_if<Reply>(&*reply); answer && !release_host.empty()) {
    if (!answer->ok) co_return Status::not_found(answer->error);
    co_return StatusReport{};
  }
  if (const auto* to = std::get_if<Redirect>(&*reply)) {
    if (redirect) *redirect = *to;
    co_return redirected(*to);
  }
  co_return Status::malformed("the server answered the status query with an unexpected frame");
}

}  // namespace ddprun::rdzv
