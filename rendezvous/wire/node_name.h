// How a node is named to people: its host name (or the address it was given with --local_addr),
// then what tells two agents on one host apart, its agent's pid: "gpu-07:41234". The same name in
// every line that names a node (hang reports, straggler notices, the rendezvous's reasons), on
// every node. A node's id on the wire (launcher/run_job.cc) is that name and a random number,
// so that an agent restarted with a recycled pid is another node; the number says nothing to a
// reader and is left out.
#pragma once

#include <string>
#include <string_view>

namespace ddprun::rdzv {

// "<host>:<pid>:<random>" → "<host>:<pid>"; any other id (a test's "node-a", ids from older
// agents) is its own name. Pure.
std::string node_display_name(std::string_view node_id);

// "<host>:<pid>:<random>" → "<host>": the node's host identity, what the server keeps out after
// a node left unfit (server/excluded_hosts.h). Only the last two components are stripped, so
// an IPv6 literal ("fd00::7:41234:99" → "fd00::7") keeps its colons. Any other id is its own
// host. Pure.
std::string node_host(std::string_view node_id);

}  // namespace ddprun::rdzv
