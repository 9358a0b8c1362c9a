// What the launchers of one job say to each other through the rendezvous store: who arrived,
// which rank failed first, and how each start ("round": the first start, then each restart)
// ended on every node. Every launcher holds one node_group over its own connection.
//
// Keys (all under the store's root):
//   node/<i>            this node's JSON facts (host, local ranks, pid), set on arrival
//   r<k>/failed         the first failure of round k, JSON; set once (compare_set), globally
//   r<k>/end/<i>        how node i's ranks ended in round k (its local exit code)
//   requeue             set when any node forwarded SIGUSR1/SIGUSR2 (launch.requeue_on_signal)
//   left/<i>            node i is done with the store (leave)
// Not here: finding the store (store_address.hpp), stopping workers (supervisor.hpp).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "launcher/rendezvous/kv_store.hpp"

namespace muster::launcher::rendezvous {

struct node_facts {
  int node = 0;
  std::string host;
  int local_ranks = 0;
  pid_t pid = 0;
};

// The first failure of a round, as every node sees it.
struct group_failure {
  int node = 0;
  std::string host;
  int rank = -1;           // -1: not a rank (the launcher was stopped, or failed itself)
  int exit_code = 1;       // what every launcher exits with
  std::string what;        // "rank 3 on gpu-a02 failed first: exit code 3"
  bool no_restart = false; // a stop the user asked for: no restart
};

class node_group {
 public:
  // `hosts`: every node's name, for messages; hosts.size() launchers take part.
  node_group(std::shared_ptr<kv_store> store, int node, std::vector<std::string> hosts);

  // Publishes `me` and waits until every node has, checking stop() every 100 ms (a signal).
  // Returns every node's facts in node order. Throws errc::environment after `timeout`
  // naming the nodes that arrived and the ones that did not, and the fix; errc::io when stop()
  // said to give up.
  std::vector<node_facts> join(const node_facts& me, milliseconds timeout,
                               const std::function<bool()>& stop);
  // Records `f` as round `round`'s first failure unless another node's came first; returns
  // the one that stands.
  group_failure publish_failure(int round, const group_failure& f);
  // This node's last word for round `round`: should its launcher vanish (killed by SIGKILL, its
  // host gone) before it ends the round, the store publishes `gone` as the round's first
  // failure, as this node's end and as its leaving, so the other nodes stop their ranks at once
  // rather than wait on a collective that never completes. Works over a connection (tcp_store_client);
  // node 0, which holds the store itself, has nobody left to tell.
  void set_last_word(int round, const group_failure& gone);
  // Round `round`'s first failure, when one was published.
  std::optional<group_failure> failure(int round);
  // This node's end of round `round`; then waits for every node's, up to `timeout` (unbounded
  // when nullopt). Throws errc::environment naming the nodes that never reported and why a
  // launcher does not end (a rank that ignores SIGKILL, its node gone).
  void end_round(int round, int exit_code, std::optional<milliseconds> timeout);

  // Says this node is done with the store (left/<i>). The host of the store (`host`) then
  // waits up to `timeout` for every node's, so none is cut off mid-request when it goes away.
  void leave(bool host, milliseconds timeout);

  void ask_requeue(const std::string& why);
  std::optional<std::string> requeue_asked();

 private:
  std::vector<std::string> node_keys(const std::string& prefix) const;
  // "gpu-a01 (node 0), gpu-a02 (node 1)" of the keys set (or not set) now.
  std::string list_nodes(const std::vector<std::string>& keys, bool set);
  // Waits for every key; after `timeout`, throws "rendezvous: N of M nodes reached <what> within
  // T s. Arrived: ... Missing: .... <advice>" (advice may name {node0}, node 0's host).
  void wait_all(const std::vector<std::string>& keys, milliseconds timeout,
                const std::function<bool()>& stop, const std::string& what,
                std::string_view advice);

  std::shared_ptr<kv_store> store_;
  int node_;
  std::vector<std::string> hosts_;
};

// A thread that waits for round k's first failure and then writes to an eventfd, for the
// supervisor's stop_fd. It owns its own store connection: stop() ends its wait by calling
// `interrupt` (the connection's shutdown) and joins it.
class failure_watch {
 public:
  failure_watch(std::shared_ptr<kv_store> store, std::function<void()> interrupt, int round);
  ~failure_watch();
  failure_watch(const failure_watch&) = delete;
  failure_watch& operator=(const failure_watch&) = delete;

  int fd() const { return fd_; }  // readable once the failure is published
  void stop();

 private:
  std::shared_ptr<kv_store> store_;
  std::function<void()> interrupt_;
  int fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// Starts a thread with every signal blocked in it, so signals sent to the launcher always
// reach the thread that reads them (the supervisor's signalfd).
std::thread start_quiet_thread(std::function<void()> body);

}  // namespace muster::launcher::rendezvous
