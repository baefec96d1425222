#include "rendezvous/daemon/release_command.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/exit_codes.h"
#include "rendezvous/daemon/status_client.h"
#include "rendezvous/daemon/status_command.h"

namespace ddprun::rdzv {
namespace {

int fail(std::FILE* err, const Status& why) {
  (void)std::fprintf(err, "ddp-rendezvous release: %s\n", why.message().c_str());
  return exit_code_for(why);
}

}  // namespace

int release_main(const std::vector<std::string>& args, std::FILE* out, std::FILE* err) {
  StatusCommandOptions options;
  std::string host;
  CLI::App app{"Let a host kept out after a node of it left unfit join this daemon's jobs again",
               "ddp-rendezvous release"};
  app.add_option("host", host, "The host, as `ddp-rendezvous status` lists it");
  auto parsed = status_flag_table().parse(app, options, args, {});
  if (!parsed) return fail(err, parsed.status());
  if (parsed->output) {
    (void)std::fprintf(out, "%s\n", parsed->output->c_str());
    return 0;
  }
  if (host.empty()) {
    return fail(err, Status::invalid_argument(
                         "no host given: ddp-rendezvous release HOST (`ddp-rendezvous status` "
                         "lists the hosts kept out)"));
  }
  auto query = status_query_options(options);
  if (!query) return fail(err, query.status());
  query->release_host = host;
  auto answer = query_status(*query);
  if (!answer) return fail(err, answer.status());
  if (options.json) {
    const nlohmann::json json = {
        {"host", host}, {"released", true}, {"answered_by", answer->answered_by}};
    (void)std::fputs((json.dump(2) + "\n").c_str(), out);
  } else {
    (void)std::fputs(
        fmt::format("released host {} at {}: its nodes may join again\n", host, answer->answered_by)
            .c_str(),
        out);
  }
  return 0;
}

}  // namespace ddprun::rdzv
