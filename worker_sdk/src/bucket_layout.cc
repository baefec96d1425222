#include "bucket_layout.h"

#include <map>

namespace ddp::detail {

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<BucketParam>& params,
                                                     const std::vector<std::size_t>& order,
                                                     std::size_t first_cap, std::size_t cap) {
  struct Open {
    std::size_t bucket;
    std::size_t bytes;
    std::size_t cap;
  };
  std::vector<std::vector<std::size_t>> buckets;
  std::map<std::string, Open> open;  // the bucket each kind is filling
  std::map<std::string, int> opened;
  for (std::size_t index : order) {
    const BucketParam& p = params[index];
    auto it = open.find(p.kind);
    if (it == open.end()) {
      buckets.emplace_back();
      const std::size_t this_cap = opened[p.kind]++ == 0 ? first_cap : cap;
      it = open.emplace(p.kind, Open{buckets.size() - 1, 0, this_cap}).first;
    }
    buckets[it->second.bucket].push_back(index);
    it->second.bytes += p.bytes;
    if (it->second.bytes >= it->second.cap) open.erase(it);
  }
  return buckets;
}

std::vector<std::size_t> reverse_registration_order(std::size_t count) {
  std::vector<std::size_t> order;
  for (std::size_t i = count; i-- > 0;) order.push_back(i);
  return order;
}

std::vector<std::size_t> complete_order(const std::vector<std::size_t>& ready, std::size_t count) {
  std::vector<char> seen(count, 0);
  std::vector<std::size_t> order;
  for (std::size_t index : ready) {
    if (index >= count || seen[index]) continue;
    seen[index] = 1;
    order.push_back(index);
  }
  for (std::size_t i = count; i-- > 0;) {
    if (!seen[i]) order.push_back(i);
  }
  return order;
}

}  // namespace ddp::detail
