// The in-process rendezvous store: see kv_store.hpp.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "common/error.hpp"
#include "launcher/rendezvous/kv_store.hpp"

namespace muster::launcher::rendezvous {

bool memory_store::all_set(const std::vector<std::string>& keys) const {
  return std::all_of(keys.begin(), keys.end(),
                     [this](const std::string& k) { return values_.count(k) != 0; });
}

void memory_store::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard lock(mutex_);
    values_[key] = value;
  }
  changed_.notify_all();
}

std::string memory_store::get(const std::string& key, milliseconds timeout) {
  wait({key}, timeout);
  std::lock_guard lock(mutex_);
  return values_.at(key);
}

std::int64_t memory_store::add(const std::string& key, std::int64_t delta) {
  std::int64_t result = 0;
  {
    std::lock_guard lock(mutex_);
    auto it = values_.find(key);
    std::int64_t current = 0;
    if (it != values_.end()) {
      try {
        current = std::stoll(it->second);
      } catch (const std::exception&) {
        MUSTER_THROW(errc::invalid_input, "rendezvous: add to key '{}', which holds a non-number",
                     key);
      }
    }
    result = current + delta;
    values_[key] = std::to_string(result);
  }
  changed_.notify_all();
  return result;
}

std::string memory_store::compare_set(const std::string& key, const std::string& expected,
                                      const std::string& desired) {
  std::string result;
  {
    std::lock_guard lock(mutex_);
    auto it = values_.find(key);
    if ((it == values_.end() && expected.empty()) || (it != values_.end() && it->second == expected))
      values_[key] = desired;
    result = values_.count(key) ? values_[key] : std::string();
  }
  changed_.notify_all();
  return result;
}

void memory_store::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (changed_.wait_for(lock, timeout, [&] { return closed_ || all_set(keys); })) {
    MUSTER_CHECK(!closed_ || all_set(keys), errc::io,
                 "rendezvous: the store is shutting down while waiting for {}",
                 fmt::join(keys, ", "));
    return;
  }
  std::vector<std::string> missing;
  for (const auto& k : keys)
    if (!values_.count(k)) missing.push_back(k);
  MUSTER_THROW(errc::environment, "rendezvous: waited {} ms for {} and {} never came", timeout.count(),
               fmt::join(keys, ", "), fmt::join(missing, ", "));
}

bool memory_store::check(const std::vector<std::string>& keys) {
  std::lock_guard lock(mutex_);
  return all_set(keys);
}

}  // namespace muster::launcher::rendezvous

namespace muster::launcher::rendezvous {

void memory_store::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  changed_.notify_all();
}

}  // namespace muster::launcher::rendezvous
