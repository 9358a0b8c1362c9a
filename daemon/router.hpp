// musterd's router: one request line in, one reply line out (protocol.hpp), no I/O, nothing
// thrown: a request it cannot serve gets an error reply naming what was wrong. A request that
// reads or writes the node store (or asks Slurm who owns a job) comes back as work for the
// store thread, which runs it and gets the reply line from it. The server's sessions call it
// for every line; tests call it directly, and run the work on a store of their own.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "common/gpu_policy.hpp"
#include "daemon/job_access.hpp"
#include "daemon/node_store.hpp"
#include "daemon/preflight.hpp"
#include "daemon/preflight_probe.hpp"

namespace muster::daemon {

// Who is on the other end of a connection, from SO_PEERCRED at accept.
struct peer {
  pid_t pid = -1;
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
};

// What the router knows of its node: facts probed at start (or described in the config) and the
// site's policy settings. Replaced as a whole on SIGHUP.
struct node_context {
  gpu_node_facts node;
  gpu_site_policy site;
  slurm_lookup slurm;
  preflight_sources preflight;  // where GPUs, the kernel log and /dev/shm are read
  preflight_thresholds limits;
  // when this musterd started (status reports its uptime; a reload keeps it)
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

// An error reply (protocol.hpp) with its stable code and one line for people.
std::string error_reply(std::string_view code, std::string_view message);

// Work for the store thread: returns the reply line. Never throws (errors become error replies).
using store_work = std::function<std::string(node_store&)>;

// What a request's store work makes: the reply's fields (JSON object members), or the access
// refusal that replaces them.
struct work_result {
  access_result access{true, "", "", std::nullopt};
  std::string fields;
};
using request_work = std::function<work_result(node_store&)>;

// A routed request: the reply, or (when `work` is set) the work that makes it.
struct routed {
  std::string reply;
  store_work work;
};

class router {
 public:
  explicit router(node_context context) : context_(std::move(context)) {}

  // The reply to one request line (without its newline), itself without a newline, from `who`.
  routed route(std::string_view line, const peer& who) const;

  const node_context& context() const { return context_; }

 private:
  node_context context_;
};

}  // namespace muster::daemon
