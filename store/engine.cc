#include "store/engine.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <limits>

#include <fmt/format.h>

namespace ddprun::store {
namespace {

Result<int64_t> parse_integer(const std::string& key, const std::string& value) {
  int64_t n = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, n);
  if (ec != std::errc() || ptr != end || value.empty()) {
    return Status::invalid_argument(fmt::format(
        "add on key '{}': its value ({} bytes) is not a decimal integer", key, value.size()));
  }
  return n;
}

bool add_overflows(int64_t a, int64_t b) {
  return (b > 0 && a > std::numeric_limits<int64_t>::max() - b) ||
         (b < 0 && a < std::numeric_limits<int64_t>::min() - b);
}

}  // namespace

Status StoreEngine::admit(size_t new_keys, size_t added_bytes) {
  const size_t keys_after = keys() + new_keys;
  if (new_keys > 0 && keys_after > limits_.max_keys) {
    ++refusals_;
    return Status::refused(fmt::format("the store is full: {} keys would exceed max_keys ({})",
                                       keys_after, limits_.max_keys));
  }
  if (added_bytes > limits_.max_total_bytes - std::min(bytes_, limits_.max_total_bytes)) {
    ++refusals_;
    return Status::refused(
        fmt::format("the store is full: {} more bytes would exceed max_total_bytes ({}; {} used)",
                    added_bytes, limits_.max_total_bytes, bytes_));
  }
  return Status();
}

void StoreEngine::store(const std::string& key, std::string value) {
  auto it = data_.find(key);
  if (it == data_.end()) {
    bytes_ += key.size() + value.size();
    auto& stored = data_.emplace(key, std::move(value)).first->second;
    key_written(key);
    if (watchers_.count(key)) notify({WatchKind::kCreated, key, {}, stored});
    return;
  }
  bytes_ = bytes_ - it->second.size() + value.size();
  std::string old = std::exchange(it->second, std::move(value));
  key_written(key);
  if (watchers_.count(key)) notify({WatchKind::kUpdated, key, std::move(old), it->second});
}

Status StoreEngine::set(const std::string& key, std::string value) {
  auto it = data_.find(key);
  const bool is_new = it == data_.end();
  const size_t old_size = is_new ? 0 : it->second.size();
  const size_t growth = (is_new ? key.size() : 0) + value.size();
  if (Status s = admit(is_new ? 1 : 0, growth > old_size ? growth - old_size : 0); !s) return s;
  store(key, std::move(value));
  return Status();
}

Result<std::string> StoreEngine::compare_set(const std::string& key, const std::string& expected,
                                             std::string desired) {
  auto it = data_.find(key);
  if (it == data_.end()) {
    if (!expected.empty()) return expected;  // c10d's answer: the key stays missing
    if (Status s = set(key, desired); !s) return s;
    return desired;
  }
  if (it->second != expected) return it->second;
  if (Status s = set(key, desired); !s) return s;
  return desired;
}

std::optional<std::string> StoreEngine::get(const std::string& key) const {
  auto it = data_.find(key);
  if (it == data_.end()) return std::nullopt;
  return it->second;
}

Result<int64_t> StoreEngine::add(const std::string& key, int64_t delta) {
  int64_t current = 0;
  if (auto it = data_.find(key); it != data_.end()) {
    auto parsed = parse_integer(key, it->second);
    if (!parsed) return parsed.status();
    current = *parsed;
  }
  if (add_overflows(current, delta)) {
    return Status::invalid_argument(
        fmt::format("add on key '{}': {} + {} overflows a 64-bit integer", key, current, delta));
  }
  const int64_t sum = current + delta;
  if (Status s = set(key, std::to_string(sum)); !s) return s;
  return sum;
}

Status StoreEngine::append(const std::string& key, const std::string& value) {
  auto it = data_.find(key);
  if (it == data_.end()) return set(key, value);
  if (Status s = admit(0, value.size()); !s) return s;
  it->second += value;
  bytes_ += value.size();
  key_written(key);
  if (watchers_.count(key)) notify({WatchKind::kAppended, key, {}, value});
  return Status();
}

bool StoreEngine::erase(const std::string& key) {
  auto it = data_.find(key);
  if (it == data_.end()) return false;
  bytes_ -= key.size() + it->second.size();
  std::string old = std::move(it->second);
  data_.erase(it);
  if (watchers_.count(key)) notify({WatchKind::kDeleted, key, std::move(old), {}});
  return true;
}

Status StoreEngine::multi_set(const std::vector<std::string>& keys,
                              std::vector<std::string> values) {
  assert(keys.size() == values.size());
  // Admission for the whole request (an upper bound: a key named twice counts twice).
  std::unordered_set<std::string_view> fresh;
  size_t growth = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    const bool is_new = !data_.count(keys[i]);
    if (is_new) fresh.insert(keys[i]);
    growth += (is_new ? keys[i].size() : 0) + values[i].size();
  }
  if (Status s = admit(fresh.size(), growth); !s) return s;
  for (size_t i = 0; i < keys.size(); ++i) store(keys[i], std::move(values[i]));
  return Status();
}

std::vector<std::string> StoreEngine::list_keys() const {
  std::vector<std::string> keys;
  keys.reserve(data_.size());
  for (const auto& [key, value] : data_) keys.push_back(key);
  return keys;
}

bool StoreEngine::exists(const std::string& key) const {
  return data_.count(key) > 0 || queues_.count(key) > 0;
}

bool StoreEngine::check(const std::vector<std::string>& keys) const {
  return std::all_of(keys.begin(), keys.end(), [this](const auto& k) { return exists(k); });
}

bool StoreEngine::wait(Client& client, const std::vector<std::string>& keys) {
  cancel_wait(client);
  PendingWait wait;
  for (const auto& key : keys) {
    if (exists(key) || std::find(wait.keys.begin(), wait.keys.end(), key) != wait.keys.end()) {
      continue;
    }
    wait.keys.push_back(key);
  }
  if (wait.keys.empty()) return true;
  wait.missing = wait.keys.size();
  for (const auto& key : wait.keys) waiting_on_[key].push_back(&client);
  waits_.emplace(&client, std::move(wait));
  return false;
}

Result<bool> StoreEngine::barrier(Client& client, const std::string& key, int64_t world_size) {
  cancel_wait(client);
  // The add wakes the barriers on the key that it completes; this client's is not registered
  // yet, so it hears its answer from the return value alone.
  auto sum = add(key, 1);
  if (!sum) return sum.status();
  if (*sum >= world_size) return true;
  waits_.emplace(&client, PendingWait{1, {key}, world_size});
  waiting_on_[key].push_back(&client);
  return false;
}

bool StoreEngine::counter_reached(const std::string& key, int64_t target) const {
  auto it = data_.find(key);
  if (it == data_.end()) return target <= 0;
  auto n = parse_integer(key, it->second);
  return n.ok() && *n >= target;
}

void StoreEngine::unregister_wait(Client* client, const PendingWait& wait) {
  for (const auto& key : wait.keys) {
    auto it = waiting_on_.find(key);
    if (it == waiting_on_.end()) continue;
    std::erase(it->second, client);
    if (it->second.empty()) waiting_on_.erase(it);
  }
}

bool StoreEngine::cancel_wait(Client& client) {
  auto it = waits_.find(&client);
  if (it == waits_.end()) return false;
  unregister_wait(&client, it->second);
  waits_.erase(it);
  return true;
}

bool StoreEngine::has_pending_wait(const Client& client) const {
  return waits_.count(const_cast<Client*>(&client)) > 0;
}

void StoreEngine::key_written(const std::string& key) {
  auto it = waiting_on_.find(key);
  if (it == waiting_on_.end()) return;
  std::vector<Client*> waiters = std::move(it->second);
  waiting_on_.erase(it);
  std::vector<Client*> done;
  std::vector<Client*> still_waiting;  // barriers whose counter is not there yet
  for (Client* c : waiters) {
    auto w = waits_.find(c);
    if (w == waits_.end()) continue;
    if (w->second.barrier_target) {
      if (!counter_reached(key, *w->second.barrier_target)) {
        still_waiting.push_back(c);
        continue;
      }
    } else if (--w->second.missing != 0) {
      continue;
    }
    waits_.erase(w);
    done.push_back(c);
  }
  if (!still_waiting.empty()) waiting_on_[key] = std::move(still_waiting);
  for (Client* c : done) c->wait_done();
}

void StoreEngine::watch(Client& client, const std::string& key) {
  if (!watched_by_[&client].insert(key).second) return;
  watchers_[key].push_back(&client);
}

void StoreEngine::notify(const WatchEvent& event) {
  auto it = watchers_.find(event.key);
  if (it == watchers_.end()) return;
  for (Client* c : it->second) c->key_changed(event);
}

size_t StoreEngine::watches() const {
  size_t n = 0;
  for (const auto& [key, clients] : watchers_) n += clients.size();
  return n;
}

Status StoreEngine::queue_push(const std::string& key, std::string value) {
  auto it = queues_.find(key);
  const bool is_new = it == queues_.end();
  if (Status s = admit(is_new ? 1 : 0, (is_new ? key.size() : 0) + value.size()); !s) return s;
  bytes_ += (is_new ? key.size() : 0) + value.size();
  ++queued_items_;
  queues_[key].push_back(std::move(value));
  // One item feeds one consumer: c10d 2.x counts the key for waiters in order and completes
  // the first one whose last missing key it was.
  auto w = waiting_on_.find(key);
  if (w == waiting_on_.end()) return Status();
  auto& waiters = w->second;
  for (auto next = waiters.begin(); next != waiters.end();) {
    Client* c = *next;
    auto pending = waits_.find(c);
    if (pending != waits_.end() && pending->second.barrier_target) {
      ++next;  // a barrier on the same key waits for its counter, not for an item
      continue;
    }
    next = waiters.erase(next);
    if (pending != waits_.end() && --pending->second.missing == 0) {
      waits_.erase(pending);
      if (waiters.empty()) waiting_on_.erase(w);
      c->wait_done();
      return Status();
    }
  }
  if (waiters.empty()) waiting_on_.erase(w);
  return Status();
}

StoreEngine::Popped StoreEngine::queue_pop(const std::string& key) {
  auto it = queues_.find(key);
  if (it == queues_.end()) return Popped{};
  Popped popped{static_cast<int64_t>(it->second.size()), std::move(it->second.front())};
  it->second.pop_front();
  bytes_ -= popped.value->size();
  --queued_items_;
  if (it->second.empty()) {
    bytes_ -= key.size();
    queues_.erase(it);
  }
  return popped;
}

int64_t StoreEngine::queue_len(const std::string& key) const {
  auto it = queues_.find(key);
  return it == queues_.end() ? 0 : static_cast<int64_t>(it->second.size());
}

void StoreEngine::forget(Client& client) {
  cancel_wait(client);
  auto it = watched_by_.find(&client);
  if (it == watched_by_.end()) return;
  for (const auto& key : it->second) {
    auto w = watchers_.find(key);
    if (w == watchers_.end()) continue;
    std::erase(w->second, &client);
    if (w->second.empty()) watchers_.erase(w);
  }
  watched_by_.erase(it);
}

}  // namespace ddprun::store
