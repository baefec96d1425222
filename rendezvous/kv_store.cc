#include "rendezvous/kv_store.h"

#include <charconv>

#include <fmt/format.h>

namespace ddprun::rdzv {

std::string KvStore::full_key(KvScope scope, const std::string& key) {
  std::string full;
  full.reserve(key.size() + 1);
  full.push_back(scope == KvScope::kJob ? 'j' : 'r');
  full += key;
  return full;
}

void KvStore::set(KvScope scope, const std::string& key, std::string value) {
  std::string full = full_key(scope, key);
  auto [it, inserted] = data_.insert_or_assign(full, std::move(value));
  if (inserted) {
    ++counts_[static_cast<int>(scope)];
    on_key_added(full);
  }
}

std::optional<std::string> KvStore::get(KvScope scope, const std::string& key) const {
  auto it = data_.find(full_key(scope, key));
  if (it == data_.end()) return std::nullopt;
  return it->second;
}

Result<int64_t> KvStore::add(KvScope scope, const std::string& key, int64_t delta) {
  int64_t current = 0;
  if (auto value = get(scope, key)) {
    auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), current);
    if (ec != std::errc() || end != value->data() + value->size()) {
      return Status::error(fmt::format("add on key '{}': its value is not an integer", key));
    }
  }
  const int64_t sum = current + delta;
  set(scope, key, std::to_string(sum));
  return sum;
}

std::string KvStore::compare_set(KvScope scope, const std::string& key, const std::string& expected,
                                 std::string desired) {
  auto current = get(scope, key);
  if (current.value_or(std::string()) != expected) return *current;
  set(scope, key, desired);
  return desired;
}

bool KvStore::erase(KvScope scope, const std::string& key) {
  if (data_.erase(full_key(scope, key)) == 0) return false;
  --counts_[static_cast<int>(scope)];
  return true;
}

int64_t KvStore::num_keys(KvScope scope) const { return counts_[static_cast<int>(scope)]; }

KvStore::WaitId KvStore::wait(KvScope scope, const std::vector<std::string>& keys,
                              WaitCallback done) {
  std::vector<std::string> missing;
  for (const auto& key : keys) {
    std::string full = full_key(scope, key);
    if (!data_.count(full)) missing.push_back(std::move(full));
  }
  if (missing.empty()) {
    done();
    return 0;
  }
  const WaitId id = next_wait_id_++;
  waits_[id] = Wait{missing.size(), std::move(done)};
  for (auto& full : missing) waiting_on_.emplace(std::move(full), id);
  return id;
}

void KvStore::cancel_wait(WaitId id) {
  if (waits_.erase(id) == 0) return;
  // Index entries of a cancelled wait are skipped lazily in on_key_added.
}

void KvStore::on_key_added(const std::string& full) {
  auto [begin, end] = waiting_on_.equal_range(full);
  std::vector<WaitCallback> ready;
  for (auto it = begin; it != end; ++it) {
    auto w = waits_.find(it->second);
    if (w == waits_.end()) continue;
    if (--w->second.missing == 0) {
      ready.push_back(std::move(w->second.done));
      waits_.erase(w);
    }
  }
  waiting_on_.erase(begin, end);
  for (auto& done : ready) done();
}

void KvStore::clear_round() {
  for (auto it = data_.begin(); it != data_.end();) {
    it = it->first[0] == 'r' ? data_.erase(it) : std::next(it);
  }
  counts_[static_cast<int>(KvScope::kRound)] = 0;
}

}  // namespace ddprun::rdzv
