// torchrun's --rdzv_conf "k=v,k=v" (rendezvous/conf/rdzv_conf.h), as a user or a launch script
// writes it, and parse_duration on the same text.
//
// Properties: errors name the flag ("--rdzv_conf: ..."); an accepted value has no negative
// duration, heartbeat_timeout > keep_alive_interval > 0 and keep_alive_max_attempt >= 1; and
// the accepted timeouts, written back as "k=<ms>ms", parse to the same values.
#include <cstddef>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "fuzz/fuzz_check.h"
#include "rendezvous/conf/rdzv_conf.h"

using namespace ddprun;

namespace {

std::string write_back(const rdzv::RendezvousConf& c) {
  std::string text = fmt::format(
      "join_timeout={}ms,last_call_timeout={}ms,close_timeout={}ms,heartbeat_timeout={}ms,"
      "keep_alive_interval={}ms,keep_alive_max_attempt={},read_timeout={}ms",
      c.join_timeout.count(), c.last_call_timeout.count(), c.close_timeout.count(),
      c.heartbeat_timeout.count(), c.keep_alive_interval.count(), c.keep_alive_max_attempt,
      c.read_timeout.count());
  if (c.is_host) text += *c.is_host ? ",is_host=true" : ",is_host=false";
  return text;
}

void check_duration(std::string_view text) {
  auto d = rdzv::parse_duration(text);
  if (!d) {
    FUZZ_CHECK(!d.error_message().empty());
    return;
  }
  FUZZ_CHECK(d->count() >= 0);
  auto again = rdzv::parse_duration(fmt::format("{}ms", d->count()));
  FUZZ_CHECK(again.ok() && *again == *d);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::as_text(data, size);
  check_duration(text);
  auto conf = rdzv::parse_rdzv_conf(text);
  if (!conf) {
    FUZZ_CHECK(fuzz::starts_with(conf.error_message(), "--rdzv_conf: "));
    return 0;
  }
  for (Millis d : {conf->join_timeout, conf->last_call_timeout, conf->close_timeout,
                   conf->heartbeat_timeout, conf->keep_alive_interval, conf->read_timeout}) {
    FUZZ_CHECK(d.count() >= 0);
  }
  FUZZ_CHECK(conf->keep_alive_max_attempt >= 1);
  FUZZ_CHECK(conf->keep_alive_interval.count() > 0);
  FUZZ_CHECK(conf->heartbeat_timeout > conf->keep_alive_interval);

  auto again = rdzv::parse_rdzv_conf(write_back(*conf));
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->join_timeout == conf->join_timeout);
  FUZZ_CHECK(again->last_call_timeout == conf->last_call_timeout);
  FUZZ_CHECK(again->close_timeout == conf->close_timeout);
  FUZZ_CHECK(again->heartbeat_timeout == conf->heartbeat_timeout);
  FUZZ_CHECK(again->keep_alive_interval == conf->keep_alive_interval);
  FUZZ_CHECK(again->keep_alive_max_attempt == conf->keep_alive_max_attempt);
  FUZZ_CHECK(again->read_timeout == conf->read_timeout);
  FUZZ_CHECK(again->is_host == conf->is_host);
  return 0;
}
