#include "rendezvous/state/etcd/etcd_records.h"

#include <charconv>
#include <string_view>

#include <fmt/format.h>

namespace ddprun::rdzv::state {
namespace {

constexpr std::string_view kMagic = "ddprun-records/1\n";

void put(std::string& out, std::string_view field) {
  out += std::to_string(field.size());
  out += ':';
  out += field;
}

// Reads the fields back, refusing anything out of bounds.
class Reader {
 public:
  explicit Reader(std::string_view value) : value_(value), at_(kMagic.size()) {}

  Result<size_t> number(const char* what) {
    const size_t colon = value_.find(':', at_);
    size_t n = 0;
    const char* first = value_.data() + at_;
    const char* last = colon == std::string_view::npos ? first : value_.data() + colon;
    auto [end, ec] = std::from_chars(first, last, n);
    if (colon == std::string_view::npos || ec != std::errc() || end != last || first == last) {
      return bad(fmt::format("{}: no length", what));
    }
    if (*first == '0' && last - first > 1) {  // one spelling per value: what is read re-encodes
      return bad(fmt::format("{}: a length with a leading zero", what));
    }
    at_ = colon + 1;
    return n;
  }
  Result<std::string> field(const char* what) {
    auto n = number(what);
    if (!n) return n.status();
    if (*n > value_.size() - at_) {
      return bad(fmt::format("{}: {} bytes announced, {} left", what, *n, value_.size() - at_));
    }
    std::string out(value_.substr(at_, *n));
    at_ += *n;
    return out;
  }
  bool done() const { return at_ == value_.size(); }
  Status bad(const std::string& why) const {
    return Status::malformed(fmt::format("stored job records unreadable at byte {}: {}", at_, why));
  }

 private:
  std::string_view value_;
  size_t at_;
};

}  // namespace

std::string encode_job_records(const StoredJob& job) {
  std::string out(kMagic);
  size_t size = out.size() + job.job.size() + 32;
  for (const auto& [id, record] : job.nodes) size += id.size() + record.size() + 24;
  out.reserve(size);
  put(out, job.job);
  out += std::to_string(job.nodes.size());
  out += ':';
  for (const auto& [id, record] : job.nodes) {
    put(out, id);
    put(out, record);
  }
  return out;
}

Result<StoredJob> decode_job_records(const std::string& value) {
  if (!std::string_view(value).starts_with(kMagic)) return StoredJob{value, {}};
  Reader in(value);
  StoredJob job;
  auto record = in.field("the job's record");
  if (!record) return record.status();
  job.job = std::move(*record);
  auto count = in.number("the node count");
  if (!count) return count.status();
  for (size_t i = 0; i < *count; ++i) {
    auto id = in.field("a node id");
    if (!id) return id.status();
    auto node = in.field("a node record");
    if (!node) return node.status();
    if (!job.nodes.emplace(std::move(*id), std::move(*node)).second) {
      return in.bad("a node stored twice");
    }
  }
  if (!in.done()) return in.bad("bytes after the last node");
  return job;
}

}  // namespace ddprun::rdzv::state
