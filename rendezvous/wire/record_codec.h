// The records the rendezvous messages carry (a node, a job's options, a rank's progress, a
// straggler finding, a node's and a job's status), written and read field by field: shared by
// the message codec (codec.cc) and the Reply payloads (payload_codec.h). Internal to the wire
// library. Same rules as the codec: no I/O, no exceptions, every count checked against the
// bytes present before anything is allocated; get() returns false on any malformed field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "rendezvous/wire/byte_io.h"
#include "rendezvous/wire/codec.h"
#include "rendezvous/wire/messages.h"

namespace ddprun::rdzv::detail {

// A peer's timeout may be at most 10 years, so no deadline arithmetic on it can overflow.
inline constexpr uint64_t kMaxTimeoutMs = 10ull * 365 * 24 * 3600 * 1000;
// RankProgressEntry: the largest activity value (agent::kMaxRankActivity) and the longest
// frame description.
inline constexpr uint8_t kMaxActivity = 4;
inline constexpr size_t kMaxWhereBytes = 256;
// The fewest bytes one entry of a list takes on the wire: a count is checked against the bytes
// left before anything is reserved for it. A straggler finding: threshold, ranks measured,
// median, count; one straggler: rank, local rank, node id, busy time.
inline constexpr size_t kStragglerFindingBytes = 4 + 4 + 8 + 4;
inline constexpr size_t kMinStragglerBytes = 4 + 4 + 4 + 8;
inline constexpr size_t kMinNodeStatusBytes = 4 + 4 + 1 + 4 + 4 + 8;

void put(ByteWriter& w, const NodeInfo& n);
void put(ByteWriter& w, const JobOptions& o);
void put(ByteWriter& w, const RankProgressEntry& e);
void put_entries(ByteWriter& w, const std::vector<RankProgressEntry>& entries);
void put(ByteWriter& w, const NodeStatus& n);
void put(ByteWriter& w, const StragglerFinding& f);
void put(ByteWriter& w, const JobStatus& j);

bool get(ByteReader& r, const CodecLimits& l, NodeInfo& n);
bool get(ByteReader& r, const CodecLimits& l, JobOptions& o);
bool get(ByteReader& r, const CodecLimits& l, RankProgressEntry& e);
bool get_entries(ByteReader& r, const CodecLimits& l, std::vector<RankProgressEntry>& out);
bool get(ByteReader& r, const CodecLimits& l, NodeStatus& n);
bool get(ByteReader& r, const CodecLimits& l, StragglerFinding& f);
bool get(ByteReader& r, const CodecLimits& l, JobStatus& j);

}  // namespace ddprun::rdzv::detail
