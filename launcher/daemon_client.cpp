// Asking musterd for the GPU environment: see daemon_client.hpp.
#include "launcher/daemon_client.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/env_knobs.hpp"
#include "common/log.hpp"

namespace muster::launcher {
namespace {

using nlohmann::json;
using clock_type = std::chrono::steady_clock;

constexpr const char* kDefaultSocket = "/run/muster/musterd.sock";  // daemon.socket's default

// The descriptor closes with the scope.
struct fd_guard {
  int fd;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

json request_of(const gpu_policy_input& in, const daemon_step& step) {
  json env = json::object();  // only what the policy reads: no secrets, no 64 KiB environments
  for (const auto& [name, value] : in.env)
    if (gpu_policy_reads(name)) env[name] = value;
  json request = {{"version", 1},
                  {"request", "env"},
                  {"job",
                   {{"tp", in.tp},
                    {"cp", in.cp},
                    {"ep", in.ep},
                    {"gpus", in.node.gpus},
                    {"sharding", in.sharding},
                    {"torch_version", in.torch_version},
                    {"memory_tight", in.memory_tight},
                    {"dump_dir", in.dump_dir},
                    {"features",
                     {{"nccl_ub", in.nccl_ub},
                      {"fsdp_double_buffer", in.fsdp_double_buffer},
                      {"tp_comm_overlap", in.tp_comm_overlap},
                      {"ep_comm_overlap", in.ep_comm_overlap},
                      {"expandable_segments", in.expandable_segments},
                      {"cuda_graphs", in.cuda_graphs}}}}},
                  {"env", env}};
  if (!step.job_id.empty()) {
    request["job"]["id"] = step.job_id;
    request["job"]["step"] = step.step_id;
  }
  return request;
}

gpu_policy_result result_of(const json& reply) {
  gpu_policy_result r;
  for (const auto& d : reply.at("set"))
    r.env.push_back(
        {d.at("rule"), d.at("variable"), d.at("value").get<std::string>(), d.at("reason")});
  for (const auto& d : reply.at("unset"))
    r.env.push_back({d.at("rule"), d.at("variable"), std::nullopt, d.at("reason")});
  for (const auto& s : reply.at("settings"))
    r.settings.push_back({s.at("rule"), s.at("setting"), s.at("value"), s.at("reason")});
  for (const auto& e : reply.at("errors")) r.errors.push_back({e.at("rule"), e.at("message")});
  return r;
}

// Waits for `events` on fd until `deadline`; false on timeout.
bool wait_for(int fd, short events, clock_type::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
  pollfd p{fd, events, 0};
  return left.count() > 0 && ::poll(&p, 1, static_cast<int>(left.count())) > 0;
}

}  // namespace

std::optional<std::filesystem::path> daemon_socket() {
  const auto set = env_value(kEnvDaemonSocket);
  if (set && set->empty()) return std::nullopt;
  return std::filesystem::path(set.value_or(kDefaultSocket));
}

std::string daemon_start_hint(const std::filesystem::path& socket,
                              const std::filesystem::path& systemd_dir) {
  std::error_code ec;
  if (std::filesystem::is_directory(systemd_dir, ec)) return "start it: systemctl start musterd";
  if (socket == kDefaultSocket)
    return "no systemd runs this host: start it as root, musterd > /var/log/musterd.log 2>&1 &; "
           "or name the socket of one running elsewhere: MUSTER_DAEMON_SOCKET=PATH";
  return fmt::format(
      "no systemd runs this host: start it, musterd --socket {} --state-dir DIR > musterd.log "
      "2>&1 &",
      socket.string());
}

std::optional<std::string> ask_daemon(const std::filesystem::path& socket,
                                      const std::string& request, std::chrono::milliseconds timeout,
                                      std::string& why_not) {
  const auto deadline = clock_type::now() + timeout;
  const auto where = socket.string();
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (where.size() >= sizeof address.sun_path) {
    why_not = where + ": path too long";
    return std::nullopt;
  }
  std::copy(where.begin(), where.end(), address.sun_path);
  // non-blocking throughout: a daemon with a full backlog or a full socket buffer costs at most
  // the timeout, never a hang
  fd_guard s{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)};
  while (s.fd >= 0 &&
         ::connect(s.fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    if (errno != EAGAIN || clock_type::now() >= deadline) {
      why_not = errno == EAGAIN ? fmt::format("musterd on {} accepted no connection within {} ms",
                                              where, timeout.count())
                : errno == EACCES
                    ? fmt::format(
                          "musterd on {} is not open to this user: {}; ask the admin to "
                          "add you to the socket's group (daemon.group, usually muster)",
                          where, std::strerror(errno))
                    : fmt::format("no musterd on {}: {}", where, std::strerror(errno));
      return std::nullopt;
    }
    ::poll(nullptr, 0, 10);  // its backlog is full: try again shortly
  }
  if (s.fd < 0) {
    why_not = fmt::format("socket(): {}", std::strerror(errno));
    return std::nullopt;
  }
  const auto line = request + "\n";
  for (std::size_t sent = 0; sent < line.size();) {
    const auto n = wait_for(s.fd, POLLOUT, deadline)
                       ? ::send(s.fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL)
                       : (errno = ETIMEDOUT, -1);
    if (n < 0 && errno == EAGAIN) continue;
    if (n <= 0) {
      why_not = fmt::format("musterd on {} did not take the request", where);
      return std::nullopt;
    }
    sent += std::size_t(n);
  }
  std::string reply;
  while (reply.find('\n') == std::string::npos) {
    if (!wait_for(s.fd, POLLIN, deadline)) {
      why_not = fmt::format("musterd on {} did not answer within {} ms", where, timeout.count());
      return std::nullopt;
    }
    char buf[8192];
    const auto n = ::recv(s.fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EAGAIN) continue;
    if (n <= 0) {
      why_not = fmt::format("musterd on {} closed the connection", where);
      return std::nullopt;
    }
    reply.append(buf, std::size_t(n));
  }
  return reply.substr(0, reply.find('\n'));
}

std::string reply_error_text(const std::string& reply) {
  const auto parsed = json::parse(reply, nullptr, false);
  const json* error = parsed.is_object() && parsed.contains("error") ? &parsed["error"] : nullptr;
  if (error && error->is_object() && error->contains("message") &&
      (*error)["message"].is_string()) {
    const auto message = (*error)["message"].get<std::string>();
    const auto code = error->contains("code") && (*error)["code"].is_string()
                          ? (*error)["code"].get<std::string>()
                          : std::string();
    return code.empty() ? message : fmt::format("{} ({})", message, code);
  }
  return fmt::format("a reply muster does not read: {}", reply.substr(0, 200));
}

daemon_answer ask_daemon_env(const std::filesystem::path& socket, const gpu_policy_input& job,
                             const daemon_step& step, std::chrono::milliseconds timeout) {
  std::string why_not;
  const auto reply =
      ask_daemon(socket, request_of(job, step).dump(-1, ' ', false, json::error_handler_t::replace),
                 timeout, why_not);
  if (!reply) return {std::nullopt, why_not};
  const auto parsed = json::parse(*reply, nullptr, false);
  if (!parsed.is_object()) return {std::nullopt, "musterd's reply is not JSON"};
  if (!parsed.contains("ok") || parsed["ok"] != true)
    return {std::nullopt, fmt::format("musterd refused the request: {}", reply_error_text(*reply))};
  try {
    return {result_of(parsed), ""};
  } catch (const std::exception& e) {
    return {std::nullopt,
            fmt::format("musterd's reply does not read as an env reply: {}", e.what())};
  }
}

std::string env_request_line(const gpu_policy_input& job, const daemon_step& step) {
  return request_of(job, step).dump(-1, ' ', false, json::error_handler_t::replace);
}

bool daemon_expected(const std::filesystem::path& socket) {
  std::error_code ec;
  return env_value(kEnvDaemonSocket).has_value() ||
         std::filesystem::exists(socket.parent_path(), ec);
}

namespace {

// Sends one record request; logs why when the daemon does not take it.
void send_record(const daemon_step& step, json request) {
  const auto socket = daemon_socket();
  if (step.job_id.empty() || !socket) return;
  request["version"] = 1;
  request["request"] = "record";
  request["job"] = {{"id", step.job_id}, {"step", step.step_id}};
  std::string why_not;
  const auto reply =
      ask_daemon(*socket, request.dump(-1, ' ', false, json::error_handler_t::replace),
                 std::chrono::milliseconds(2000), why_not);
  if (reply) {
    const auto parsed = json::parse(*reply, nullptr, false);
    if (parsed.is_object() && parsed.value("ok", false)) return;
    why_not = fmt::format("musterd refused the record: {}", reply_error_text(*reply));
  }
  // said once a launcher: the step's end after its start finds the daemon as absent
  static bool warned = false;
  const bool warn = daemon_expected(*socket) && !warned;
  warned = warned || warn;
  log::get("launcher")
      ->log(warn ? spdlog::level::warn : spdlog::level::debug,
            "{}: the node does not record step {}.{}", why_not, step.job_id, step.step_id);
}

}  // namespace

void record_step_start(const daemon_step& step, const std::filesystem::path& run_dir,
                       int num_ranks) {
  send_record(step, {{"event", "start"}, {"run_dir", run_dir.string()}, {"num_ranks", num_ranks}});
}

void record_step_end(const daemon_step& step, int exit_code) {
  const bool stopped = exit_code == 128 + SIGTERM || exit_code == 128 + SIGINT;
  const char* state = exit_code == 0 ? "completed" : stopped ? "cancelled" : "failed";
  send_record(step, {{"event", "end"},
                     {"state", state},
                     {"exit_code", std::clamp(exit_code, -1, 255)},
                     {"message", fmt::format("the launcher exited {}", exit_code)}});
}

}  // namespace muster::launcher
