#include "agent/coordination/store_host.h"

#include <spdlog/spdlog.h>

namespace ddprun::agent {

StoreHost::StoreHost(boost::asio::io_context& io, StoreHostOptions options)
    : io_(io), options_(std::move(options)) {}

Status StoreHost::listen(uint16_t port) {
  server_.emplace(io_, options_.server);
  if (Status s = server_->listen(options_.address, port); !s) {
    server_.reset();
    return s.with_context("cannot host the job's store on " + options_.address +
                          " (the address this node advertises; set --local_addr or "
                          "--master_addr to one of this machine's)");
  }
  return {};
}

Result<int> StoreHost::offer_port() {
  if (options_.fixed_port) return *options_.fixed_port;
  if (!options_.agent_store) {
    auto reserved = PortReservation::reserve();
    if (!reserved) return reserved.status().with_context("choosing MASTER_PORT");
    reservation_ = std::move(reserved.value());
    return reservation_->port();
  }
  if (Status s = listen(0); !s) return s;
  return static_cast<int>(server_->port());
}

Status StoreHost::on_assigned(const RoundAssignment& assignment) {
  if (!options_.agent_store) return {};
  if (assignment.group_rank != 0) {
    server_.reset();  // another node hosts the job's store
    return {};
  }
  if (!server_) return listen(static_cast<uint16_t>(assignment.master_port));
  spdlog::debug("hosting the job's store on {}:{}", options_.address, server_->port());
  return {};
}

void StoreHost::end_round() {
  server_.reset();  // closes every connection; the workers are gone
  reservation_.reset();
}

}  // namespace ddprun::agent
