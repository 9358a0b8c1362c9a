// The rendezvous store: a small key-value store in the shape of PyTorch c10d's Store, through
// which the launchers of a job find each other and hand out addresses and ids (set / get / add
// / compare_set / wait, each blocking call with a timeout). Values are bytes (an NCCL unique id
// is 128 of them).
//
// Implementations: memory_store (in this process; the seam for tests, and what the TCP server
// keeps), prefix_store (a decorator that namespaces keys, as c10d's PrefixStore), and the TCP
// client and server (tcp_store.hpp) that node 0's launcher hosts.
// Errors: a wait that runs out throws errc::environment naming the keys still missing and the
// time waited; a lost connection throws errc::io.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace muster::launcher::rendezvous {

using std::chrono::milliseconds;

class kv_store {
 public:
  virtual ~kv_store() = default;
  // Sets key to value, waking every waiter on it.
  virtual void set(const std::string& key, const std::string& value) = 0;
  // The value of key, waiting up to `timeout` for it to be set.
  virtual std::string get(const std::string& key, milliseconds timeout) = 0;
  // Adds delta to the integer stored at key (0 when unset) and returns the new value.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  // Sets key to desired when its value is `expected` ("" also matches an unset key); returns
  // the value it holds afterwards.
  virtual std::string compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) = 0;
  // Waits up to `timeout` for every key to be set.
  virtual void wait(const std::vector<std::string>& keys, milliseconds timeout) = 0;
  // Whether every key is set now (no waiting).
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // This client's last word, for a process that may die without a goodbye: when its connection
  // to the store ends, every key of `writes` that is still unset is set, unless `unless_key`
  // is set by then. A later call replaces an earlier one. A store reached without a connection
  // (memory_store) has no end to watch and ignores it.
  using key_values = std::vector<std::pair<std::string, std::string>>;
  virtual void set_last_word(const key_values& writes, const std::string& unless_key) {
    (void)writes;
    (void)unless_key;
  }
};

// Thread-safe, in this process.
class memory_store final : public kv_store {
 public:
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, milliseconds timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  void wait(const std::vector<std::string>& keys, milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  // Wakes every waiter with errc::io ("shutting down"); later waits fail at once.
  void close();

 private:
  bool all_set(const std::vector<std::string>& keys) const;  // with mutex_ held
  bool closed_ = false;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

// Every key of `inner` behind "<prefix>/".
class prefix_store final : public kv_store {
 public:
  prefix_store(std::string prefix, std::shared_ptr<kv_store> inner)
      : prefix_(std::move(prefix) + "/"), inner_(std::move(inner)) {}
  void set(const std::string& key, const std::string& value) override {
    inner_->set(prefix_ + key, value);
  }
  std::string get(const std::string& key, milliseconds timeout) override {
    return inner_->get(prefix_ + key, timeout);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    return inner_->add(prefix_ + key, delta);
  }
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override {
    return inner_->compare_set(prefix_ + key, expected, desired);
  }
  void wait(const std::vector<std::string>& keys, milliseconds timeout) override {
    inner_->wait(prefixed(keys), timeout);
  }
  bool check(const std::vector<std::string>& keys) override { return inner_->check(prefixed(keys)); }
  void set_last_word(const key_values& writes, const std::string& unless_key) override {
    key_values prefixed_writes;
    for (const auto& [k, v] : writes) prefixed_writes.emplace_back(prefix_ + k, v);
    inner_->set_last_word(prefixed_writes, prefix_ + unless_key);
  }

 private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    for (const auto& k : keys) out.push_back(prefix_ + k);
    return out;
  }
  std::string prefix_;
  std::shared_ptr<kv_store> inner_;
};

}  // namespace muster::launcher::rendezvous
