// The launchers' conversation through the store: see node_group.hpp.
#include "launcher/rendezvous/node_group.hpp"

#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace muster::launcher::rendezvous {
namespace {

using clock = std::chrono::steady_clock;
constexpr milliseconds kSlice{100};

std::string round_key(int round, const std::string& rest) {
  return fmt::format("r{}/{}", round, rest);
}

std::string to_json(const group_failure& f) {
  return nlohmann::json{{"node", f.node},           {"host", f.host}, {"rank", f.rank},
                        {"exit_code", f.exit_code}, {"what", f.what}, {"no_restart", f.no_restart}}
      .dump();
}

group_failure from_json(const std::string& text) {
  auto j = nlohmann::json::parse(text);
  return {j.at("node").get<int>(),         j.at("host").get<std::string>(),
          j.at("rank").get<int>(),         j.at("exit_code").get<int>(),
          j.at("what").get<std::string>(), j.at("no_restart").get<bool>()};
}

}  // namespace

node_group::node_group(std::shared_ptr<kv_store> store, int node, std::vector<std::string> hosts)
    : store_(std::move(store)), node_(node), hosts_(std::move(hosts)) {}

std::vector<std::string> node_group::node_keys(const std::string& prefix) const {
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < hosts_.size(); ++i) keys.push_back(fmt::format("{}/{}", prefix, i));
  return keys;
}

std::string node_group::list_nodes(const std::vector<std::string>& keys, bool set) {
  std::string out;
  int shown = 0, more = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (store_->check({keys[i]}) != set) continue;
    if (shown == 16) {
      ++more;
      continue;
    }
    out += fmt::format("{}{} (node {})", out.empty() ? "" : ", ", hosts_[i], i);
    ++shown;
  }
  if (more > 0) out += fmt::format(" and {} more", more);
  return out.empty() ? "none" : out;
}

void node_group::wait_all(const std::vector<std::string>& keys, milliseconds timeout,
                          const std::function<bool()>& stop, const std::string& what,
                          std::string_view advice) {
  const auto deadline = clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - clock::now());
    try {
      store_->wait(keys, std::clamp(left, milliseconds(0), kSlice));
      return;
    } catch (const error& e) {
      if (e.category() != errc::environment) throw;  // the store is gone
    }
    MUSTER_CHECK(!(stop && stop()), errc::io,
                 "rendezvous: stopped by a signal while waiting for "
                 "{}",
                 what);
    if (clock::now() < deadline) continue;
    int arrived = 0;
    for (const auto& k : keys) arrived += store_->check({k}) ? 1 : 0;
    MUSTER_THROW(errc::environment,
                 "rendezvous: {} of {} nodes reached {} within {} s. Arrived: {}. Missing: {}. {}",
                 arrived, keys.size(), what, (timeout.count() + 999) / 1000, list_nodes(keys, true),
                 list_nodes(keys, false),
                 fmt::format(fmt::runtime(advice), fmt::arg("node0", hosts_.front())));
  }
}

std::vector<node_facts> node_group::join(const node_facts& me, milliseconds timeout,
                                         const std::function<bool()>& stop) {
  store_->set(
      fmt::format("node/{}", node_),
      nlohmann::json{{"host", me.host}, {"local_ranks", me.local_ranks}, {"pid", me.pid}}.dump());
  auto keys = node_keys("node");
  wait_all(keys, timeout, stop, "the rendezvous",
           "Check that srun started `muster launch` on every node of the step (srun "
           "--ntasks-per-node=1), that the missing nodes can resolve and reach {node0} (node 0; "
           "else set launch.master_addr to an address of node 0 they can reach), and their logs; "
           "or raise launch.timeout_rendezvous");
  std::vector<node_facts> all;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    auto j = nlohmann::json::parse(store_->get(keys[i], milliseconds(0)));
    all.push_back({static_cast<int>(i), j.at("host").get<std::string>(),
                   j.at("local_ranks").get<int>(), j.at("pid").get<pid_t>()});
  }
  return all;
}

group_failure node_group::publish_failure(int round, const group_failure& f) {
  return from_json(store_->compare_set(round_key(round, "failed"), "", to_json(f)));
}

void node_group::set_last_word(int round, const group_failure& gone) {
  const auto end = round_key(round, fmt::format("end/{}", node_));
  store_->set_last_word({{round_key(round, "failed"), to_json(gone)},
                         {end, std::to_string(gone.exit_code)},
                         {fmt::format("left/{}", node_), "1"}},
                        end);
}

std::optional<group_failure> node_group::failure(int round) {
  auto key = round_key(round, "failed");
  if (!store_->check({key})) return std::nullopt;
  return from_json(store_->get(key, milliseconds(0)));
}

void node_group::end_round(int round, int exit_code, std::optional<milliseconds> timeout) {
  store_->set(round_key(round, fmt::format("end/{}", node_)), std::to_string(exit_code));
  auto keys = node_keys(round_key(round, "end"));
  if (timeout) {
    wait_all(keys, *timeout, nullptr, fmt::format("the end of start {}", round),
             "Their launchers did not stop their ranks within launch.kill_grace + 30 s: a rank "
             "that ignores SIGKILL (state D in ps: stuck in the GPU driver or a file system), a "
             "node that is gone, or one that lost node 0's store and never heard of the failure. "
             "Read their lines in the job's output, `sinfo -R` and the node's kernel log; Slurm "
             "ends their step when the job ends");
    return;
  }
  for (;;) {
    try {
      store_->wait(keys, std::chrono::hours(1));
      return;
    } catch (const error& e) {
      if (e.category() != errc::environment) throw;
    }
  }
}

void node_group::leave(bool host, milliseconds timeout) {
  try {
    store_->set(fmt::format("left/{}", node_), "1");
  } catch (const error& e) {
    // The host may close the store as soon as it sees the key, before it answers the set.
    if (host || e.category() != errc::io) throw;
  }
  if (!host) return;
  try {
    store_->wait(node_keys("left"), timeout);
  } catch (const error&) {
    // a node that went away without a word: nothing more to wait for
  }
}

void node_group::ask_requeue(const std::string& why) {
  store_->compare_set("requeue", "", why);
}

std::optional<std::string> node_group::requeue_asked() {
  if (!store_->check({"requeue"})) return std::nullopt;
  return store_->get("requeue", milliseconds(0));
}

failure_watch::failure_watch(std::shared_ptr<kv_store> store, std::function<void()> interrupt,
                             int round)
    : store_(std::move(store)), interrupt_(std::move(interrupt)) {
  fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  MUSTER_CHECK(fd_ >= 0, errc::io, "eventfd: {}", std::strerror(errno));
  thread_ = start_quiet_thread([this, key = round_key(round, "failed")] {
    while (!stopping_) {
      try {
        store_->wait({key}, std::chrono::hours(1));
      } catch (const error& e) {
        if (e.category() == errc::environment) continue;  // an hour passed: wait again
        if (stopping_) return;
        // The store went away (node 0's launcher died): that is a failure too.
      }
      std::uint64_t one = 1;
      [[maybe_unused]] auto n = ::write(fd_, &one, sizeof one);
      return;
    }
  });
}

failure_watch::~failure_watch() {
  stop();
  ::close(fd_);
}

void failure_watch::stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  interrupt_();
  thread_.join();
}

std::thread start_quiet_thread(std::function<void()> body) {
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &old);
  std::thread t(std::move(body));
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return t;
}

}  // namespace muster::launcher::rendezvous
