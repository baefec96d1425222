#include "rendezvous/client_handshake.h"

#include <fmt/format.h>

#include "rendezvous/frame_io.h"
#include "rendezvous/security/challenge.h"
#include "rendezvous/server_address.h"

namespace ddprun::rdzv {
namespace {

asio::awaitable<Status> send(Stream& stream, const ClientMessage& message) {
  const std::string frame = encode_frame(message);
  std::vector<asio::const_buffer> buffers;
  buffers.push_back(asio::buffer(frame));
  boost::system::error_code ec;
  co_await stream.write(buffers, ec);
  if (ec) co_return Status::closed("handshake: " + ec.message());
  co_return Status();
}

asio::awaitable<Result<ServerMessage>> receive(Stream& stream, const std::string& job_id,
                                               const CodecLimits& limits) {
  std::vector<uint8_t> body;
  Status read = co_await read_frame(stream, limits, body);
  if (read.is_refused()) {  // a TLS alert: the server refused this node's certificate
    co_return Status::refused(fmt::format(
        "authentication failed for job {}: the server refused this node's TLS certificate "
        "({}); check --rdzv_conf tls_cert_file and tls_key_file, and that the server trusts "
        "the CA that signed them",
        job_id, read.message()));
  }
  if (read.is_malformed()) {
    co_return Status::refused(
        "handshake: the server's answer is not a rendezvous frame; is this a ddprun "
        "rendezvous endpoint, and does it serve TLS (then set --rdzv_conf tls_ca_file)?");
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
Status unproven_server(const std::string& job_id) {
  return Status::refused(fmt::format(
      "authentication failed for job {}: this node has a token (--rdzv_conf token_file) but "
      "the server has none for the job, so it cannot prove it is the real server; give the "
      "server the same token (ddp-rendezvous --token-file, or tokens: in its config)",
      job_id));
}

// The challenge-response proper, after the server's AuthChallenge.
asio::awaitable<Status> answer_challenge(Stream& stream, const AuthChallenge& challenge,
                                         const std::string& job_id, const Secret& token,
                                         const std::string& client_nonce) {
  const std::string expected = server_proof(token, job_id, client_nonce, challenge.server_nonce);
  if (challenge.server_nonce.size() != kNonceBytes ||
      !proofs_equal(expected, challenge.server_proof)) {
    // Tell the server, so that it logs the failure as one too, then give up.
    const ClientMessage refusal = AuthProofMsg{};  // named: GCC 12 mishandles temporaries here
    co_await send(stream, refusal);
    co_return Status::refused(fmt::format(
        "authentication failed for job {}: the server's proof does not match this node's "
        "token; the server and this node hold different tokens (check --rdzv_conf "
        "token_file here and the server's --token-file)",
        job_id));
  }
  const ClientMessage proof =
      AuthProofMsg{client_proof(token, job_id, client_nonce, challenge.server_nonce)};
  co_return co_await send(stream, proof);
}

}  // namespace

asio::awaitable<Status> client_handshake(Stream& stream, const std::string& job_id,
                                         const ClientCredentials& credentials,
                                         const std::string& server_name, const CodecLimits& limits,
                                         std::optional<Redirect>* redirect) {
  Status tls = co_await stream.handshake(Stream::Role::kClient, server_name);
  if (!tls) {
    co_return tls.is_refused()
        ? Status::refused(fmt::format("authentication failed for job {}: {} (check --rdzv_conf "
                                      "tls_ca_file, tls_cert_file, tls_server_name)",
                                      job_id, tls.message()))
        : tls;
  }
  const bool has_token = !credentials.token.empty();
  std::string nonce;
  if (has_token) {
    auto fresh = random_nonce();
    if (!fresh) co_return fresh.status();
    nonce = std::move(*fresh);
  }
  const ClientMessage hello = Hello{kProtocolMagic, kProtocolVersion, job_id, nonce};
  if (Status s = co_await send(stream, hello); !s) co_return s;
  auto reply = co_await receive(stream, job_id, limits);
  if (!reply) co_return reply.status();
  if (const auto* challenge = std::get_if<AuthChallenge>(&*reply); challenge && has_token) {
    Status answered =
        co_await answer_challenge(stream, *challenge, job_id, credentials.token, nonce);
    if (!answered) co_return answered;
    reply = co_await receive(stream, job_id, limits);
    if (!reply) co_return reply.status();
  } else if (std::holds_alternative<HelloAck>(*reply) && has_token) {
    co_return unproven_server(job_id);
  }
  if (std::holds_alternative<HelloAck>(*reply)) co_return Status();
  if (const auto* error = std::get_if<ErrorMsg>(&*reply)) co_return refused_by_server(*error);
  if (const auto* to = std::get_if<Redirect>(&*reply)) {
    if (redirect) *redirect = *to;
    co_return Status::unavailable(
        to->host.empty() ? std::string("this replica does not lead and no replica leads right now")
                         : "this replica does not lead; the leader is " +
                               to_string(ServerAddress{to->host, to->port}));
  }
  co_return Status::refused(
      "handshake: the server did not answer with HelloAck; is this a ddprun rendezvous "
      "endpoint?");
}

}  // namespace ddprun::rdzv
