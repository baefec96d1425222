// The rendezvous server's metrics (ddp-rendezvous --metrics-port; see docs/metrics.md), read at
// scrape time from its counters (server_counters.h) and its jobs' snapshot: a collector added
// to a metrics registry, so the server itself knows nothing of metrics or HTTP.
//
//   ddprun_rendezvous_connections                           open now
//   ddprun_rendezvous_connections_accepted_total
//   ddprun_rendezvous_connections_rejected_total{reason}    handshake | auth | to_string(Limit)
//   ddprun_rendezvous_deadline_drops_total
//   ddprun_rendezvous_accepts_out_of_descriptors_total
//   ddprun_rendezvous_messages_total{direction,type}        in | out; frame type
//   ddprun_rendezvous_bytes_total{direction}
//   ddprun_rendezvous_round_duration_seconds                round opened → ranks assigned
//   ddprun_rendezvous_excluded_hosts                        hosts kept out now
//   ddprun_rendezvous_host_exclusions_total                 nodes that left unfit
//   ddprun_rendezvous_joins_refused_excluded_total          joins refused: host kept out
//   ddprun_rendezvous_jobs
//   ddprun_rendezvous_job_state{job_id,state}               1 for the job's state
//   ddprun_rendezvous_job_nodes{job_id,state}               pending | standby | member | idle
//   ddprun_rendezvous_job_nodes_disconnected{job_id}        within their reconnect grace
//   ddprun_rendezvous_job_round{job_id}, _job_restarts{job_id}, _job_max_restarts{job_id},
//   ddprun_rendezvous_job_connections{job_id}
//
// Per-job series disappear with the job (the server forgets a job once it has no nodes and no
// connections left).
#pragma once

#include <string>

#include <boost/asio/io_context.hpp>

#include "common/result.h"
#include "metrics/http_endpoint.h"
#include "metrics/registry.h"
#include "rendezvous/server/server.h"

namespace ddprun::rdzv {

// `server` must outlive `registry`'s scrapes; both are used on the server's io_context thread.
void add_server_metrics(metrics::Registry& registry, const RendezvousServer& server);

// ddp-rendezvous --metrics-port: the server's metrics and the process metrics served over HTTP
// on the server's loop. /healthz answers 200 while the loop runs and the server accepts, 503
// once it is shutting down. Used on the io_context's thread; `server` must outlive it.
class ServerMetricsEndpoint {
 public:
  ServerMetricsEndpoint(boost::asio::io_context& io, const RendezvousServer& server,
                        metrics::HttpEndpointOptions options);
  // Errors name the address.
  Status listen() { return endpoint_.listen(); }
  uint16_t port() const { return endpoint_.port(); }

 private:
  metrics::Registry registry_;
  metrics::HttpEndpoint endpoint_;
};

// The metric label of a frame type ("join", "round_assigned", ...), by variant index.
const char* client_message_label(size_t index);
const char* server_message_label(size_t index);

}  // namespace ddprun::rdzv
