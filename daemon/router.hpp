// musterd's router: one request line in, one reply line out (protocol.hpp), no I/O, nothing
// thrown: a request it cannot serve gets an error reply naming what was wrong. The server's
// sessions call it for every line; tests call it directly.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "common/gpu_policy.hpp"

namespace muster::daemon {

// What the router knows of its node: facts probed at start (or described in the config) and the
// site's policy settings. Replaced as a whole on SIGHUP.
struct node_context {
  gpu_node_facts node;
  gpu_site_policy site;
  // when this musterd started (status reports its uptime; a reload keeps it)
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

// An error reply (protocol.hpp) with its stable code and one line for people.
std::string error_reply(std::string_view code, std::string_view message);

class router {
 public:
  explicit router(node_context context) : context_(std::move(context)) {}

  // The reply to one request line (without its newline), itself without a newline.
  std::string handle(std::string_view line) const;

 private:
  node_context context_;
};

}  // namespace muster::daemon
