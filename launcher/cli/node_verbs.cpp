// `muster node status|env|preflight|job-end`: this node's musterd, asked through its socket.
//   status     the daemon's version and uptime, the node's GPUs, network and HCAs, the site's
//              policy, recent job steps (its `status` request)
//   env        the environment musterd gives a job's workers here, each with its rule and
//              reason (its `env` request for the job file's layout)
//   preflight  whether the node is fit for a job step now (its `preflight` request); Slurm's
//              job, step and GPUs by default, so a prolog runs it bare
//   job-end    the job is over on this node (Slurm's epilog): steps that never recorded their
//              end are closed as cancelled
// Exit 1 when no daemon answers (naming the socket and why) or preflight finds the node unfit;
// 2 for bad input, and for an env whose settings cannot work together; preflight exits 4 when
// it could not ask (no daemon, or a refusal), so a prolog drains only nodes found unfit;
// job-end exits 0 when recorded (or the node never saw the job), 4 when it could not ask.
#include <fmt/format.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/error.hpp"
#include "common/job_config.hpp"
#include "launcher/cli/node_job.hpp"
#include "launcher/cli/verbs.hpp"
#include "launcher/daemon_client.hpp"
#include "launcher/launch_policy.hpp"
#include "launcher/local_gpus.hpp"
#include "launcher/plan/job_plan.hpp"
#include "launcher/slurm_step.hpp"

namespace muster::cli {
namespace {

inline constexpr int kExitNotAsked = 4;  // node preflight: musterd could not be asked

using nlohmann::json;

std::string joined(const json& list) {
  std::string out;
  for (const auto& item : list) out += (out.empty() ? "" : ", ") + item.get<std::string>();
  return out.empty() ? "none" : out;
}

// The daemon's reply to `request`, or nullopt after saying on stderr why there is none. An
// error reply whose code is in `also_answers` is returned as it is.
std::optional<json> ask(const std::string& verb, const std::string& request,
                        std::initializer_list<std::string_view> also_answers = {}) {
  const auto socket = launcher::daemon_socket();
  if (!socket) {
    fmt::print(stderr, "muster: node {}: MUSTER_DAEMON_SOCKET is empty: no daemon to ask\n", verb);
    return std::nullopt;
  }
  std::string why_not;
  const auto reply =
      launcher::ask_daemon(*socket, request, std::chrono::milliseconds(10000), why_not);
  if (!reply) {
    const bool absent = why_not.starts_with("no musterd");
    fmt::print(stderr, "muster: node {}: {}{}\n", verb, why_not,
               absent ? fmt::format(" ({})", launcher::daemon_start_hint(*socket)) : "");
    return std::nullopt;
  }
  auto r = json::parse(*reply, nullptr, false);
  const auto is_answer = [&](const json& reply) {
    if (reply.value("ok", false)) return true;
    const auto code = reply.contains("error") && reply["error"].is_object()
                          ? reply["error"].value("code", "")
                          : std::string();
    for (const auto accepted : also_answers)
      if (code == accepted) return true;
    return false;
  };
  if (!r.is_object() || !is_answer(r)) {
    fmt::print(stderr, "muster: node {}: musterd refused it: {}\n", verb,
               launcher::reply_error_text(*reply));
    return std::nullopt;
  }
  return r;
}

// Runs `print` over a reply, turning a reply of another shape into one clear line.
template <class F>
int print_reply(const std::string& verb, const json& r, F print) {
  try {
    return print(r);
  } catch (const json::exception& e) {  // a daemon of another version
    fmt::print(stderr, "muster: node {}: musterd's reply does not read as expected: {}\n", verb,
               e.what());
    return kExitFailure;
  }
}

int print_status(const json& r) {
  const auto& d = r.at("daemon");
  const auto& n = r.at("node");
  const auto& p = r.at("policy");
  fmt::print("musterd   {} (git {}), up {:.0f} s, on {}\n", d.at("version").get<std::string>(),
             d.at("git").get<std::string>(), d.at("uptime_s").get<double>(),
             launcher::daemon_socket()->string());
  fmt::print("gpus      {}{}\n", n.at("gpus").get<int>(),
             n.at("compute_major").get<int>() > 0
                 ? fmt::format(" (compute capability {}.x)", n.at("compute_major").get<int>())
                 : "");
  if (r.contains("gpus")) {
    const auto& g = r.at("gpus");
    if (g.at("source") == "none")
      fmt::print("          {}\n", g.value("why_none", std::string("no GPU facts")));
    else
      fmt::print("driver    {}, CUDA {}.{} (from {})\n", g.at("driver_version").get<std::string>(),
                 g.at("cuda_driver_version").get<int>() / 1000,
                 g.at("cuda_driver_version").get<int>() % 1000 / 10,
                 g.at("source").get<std::string>());
    for (const auto& dev : g.at("devices"))
      fmt::print("  gpu {}   {}, {} of {} MiB free, {} NVLinks{}, {} processes\n",
                 dev.at("index").get<int>(), dev.at("name").get<std::string>(),
                 dev.at("memory_free_mib").get<std::uint64_t>(),
                 dev.at("memory_total_mib").get<std::uint64_t>(),
                 dev.at("nvlinks_active").get<int>(),
                 dev.value("nvswitch", false) ? " (NVSwitch)" : "", dev.at("processes").size());
  }
  fmt::print("network   {}\n", joined(n.at("interfaces")));
  fmt::print("hcas      {}\n", joined(n.at("ib_hcas")));
  fmt::print("policy    NVLS {}, NCCL trace buffer {}\n",
             p.at("nvls_off").get<bool>() ? "off" : "as NCCL decides",
             p.at("trace_buffer").get<int>());
  if (r.contains("recent_steps"))
    for (const auto& s : r.at("recent_steps"))
      fmt::print("step      job {} step {} uid {}: {}{}\n", s.at("job").get<std::string>(),
                 s.at("step").get<std::string>(), s.at("uid").get<std::int64_t>(),
                 s.at("state").get<std::string>(),
                 s.at("exit_code").is_null()
                     ? ""
                     : fmt::format(" (exit {})", s.at("exit_code").get<std::int64_t>()));
  return kExitOk;
}

int node_status(bool as_json) {
  const auto r = ask("status", R"({"version": 1, "request": "status"})");
  if (!r) return kExitFailure;
  if (as_json) {
    fmt::print("{}\n", r->dump(2));
    return kExitOk;
  }
  return print_reply("status", *r, print_status);
}

struct env_options {
  std::vector<std::string> args;  // a job file and key=value overrides
  int gpus = -1;                  // -1: the GPUs in /dev
  int nodes = 0;                  // the job's nodes; 0: the Slurm job's, else 1
  bool json = false;
};

int print_env(const json& r, int gpus) {
  if (r.at("set").empty() && r.at("unset").empty() && r.at("settings").empty() &&
      r.at("errors").empty())
    fmt::print(
        "nothing to set or unset: a step with {} GPUs here keeps its environment as it "
        "is{}\n",
        gpus, gpus == 0 ? " (give --gpus 8 and a job file to see a GPU step's)" : "");
  for (const auto& d : r.at("set"))
    fmt::print("set      {}={}\n         {}: {}\n", d.at("variable").get<std::string>(),
               d.at("value").get<std::string>(), d.at("rule").get<std::string>(),
               d.at("reason").get<std::string>());
  for (const auto& d : r.at("unset"))
    fmt::print("unset    {}\n         {}: {}\n", d.at("variable").get<std::string>(),
               d.at("rule").get<std::string>(), d.at("reason").get<std::string>());
  for (const auto& s : r.at("settings"))
    fmt::print("setting  {} = {}\n         {}: {}\n", s.at("setting").get<std::string>(),
               s.at("value").get<std::string>(), s.at("rule").get<std::string>(),
               s.at("reason").get<std::string>());
  for (const auto& e : r.at("errors"))
    fmt::print("error    {}: {}\n", e.at("rule").get<std::string>(),
               e.at("message").get<std::string>());
  return r.at("errors").empty() ? kExitOk : kExitUsage;
}

int node_env(const env_options& o) {
  auto [file, overrides] = split_job_args(o.args, "node env", "give one, then key=value overrides");
  auto loaded = load_job_config(file, overrides);
  const int gpus = o.gpus >= 0 ? o.gpus : launcher::count_local_gpus();
  const int ranks = launcher::local_ranks(loaded.config.launch.nproc, gpus);
  // the job's layout is over all its nodes, of which this is one
  int nodes = o.nodes;
  if (nodes <= 0) {
    const char* slurm = std::getenv("SLURM_JOB_NUM_NODES");
    nodes = slurm && *slurm ? std::max(1, std::atoi(slurm)) : 1;
  }
  launcher::plan::plan_request request;
  request.world = launcher::plan::world_size{
      ranks * nodes, nodes == 1 ? fmt::format("{} ranks on this node", ranks)
                                : fmt::format("{} nodes x {} ranks", nodes, ranks)};
  request.gpus_per_node = ranks;
  const auto layout = launcher::plan::make_plan(loaded.config, loaded.where, request).layout;
  // the step of `muster run` or `launch` with no program of its own: muster-train, which keeps
  // its FSDP buffers; its run directory is made when it starts
  const auto input = launcher::launch_policy_input(loaded.config, layout, gpus,
                                                   launcher::process_env(), "<run directory>",
                                                   /*double_buffer=*/true);
  const auto r = ask("env", launcher::env_request_line(input, {}));
  if (!r) return kExitFailure;
  if (o.json) {
    fmt::print("{}\n", r->dump(2));
    return r->at("errors").empty() ? kExitOk : kExitUsage;
  }
  return print_reply("env", *r, [gpus](const json& reply) { return print_env(reply, gpus); });
}

struct preflight_options {
  std::string job, step, gpus, run_dir;
  int num_gpus = -1;
  bool json = false;
};

std::string env_or(const char* name, const std::string& given) {
  if (!given.empty()) return given;
  const char* value = std::getenv(name);
  return value ? value : "";
}

// "0,1,2,3" as GPU indices; throws errc::invalid_input naming `what` and the bad item.
std::vector<int> gpu_indices(const std::string& list, const std::string& what) {
  std::vector<int> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    auto end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    const auto item = list.substr(start, end - start);
    const bool digits = !item.empty() && item.size() <= 4 &&
                        item.find_first_not_of("0123456789") == std::string::npos;
    MUSTER_CHECK(digits, errc::invalid_input,
                 "node preflight: {}: \"{}\" in \"{}\" is not a GPU index; give indices such as "
                 "0,1,2,3",
                 what, item, list);
    out.push_back(std::stoi(item));
    start = end + 1;
  }
  return out;
}

int print_preflight(const json& r) {
  for (const auto& c : r.at("checks"))
    fmt::print("{:<5} {:<17} {}\n", c.at("status").get<std::string>(),
               c.at("check").get<std::string>(), c.at("detail").get<std::string>());
  const bool passed = r.at("passed").get<bool>();
  fmt::print("{}\n", passed ? "preflight passed" : "preflight FAILED");
  return passed ? kExitOk : kExitFailure;
}

int node_preflight(const preflight_options& o) {
  json request = {{"version", 1}, {"request", "preflight"}};
  const auto job = env_or("SLURM_JOB_ID", o.job);
  MUSTER_CHECK(!job.empty(), errc::invalid_input,
               "node preflight: which job? give --job ID (inside Slurm, SLURM_JOB_ID is taken)");
  request["job"] = {{"id", job}, {"step", env_or("SLURM_STEP_ID", o.step)}};
  // SLURM_JOB_GPUS: the indices Slurm gave the job on this node ("0,1,2,3")
  if (const auto gpus = env_or("SLURM_JOB_GPUS", o.gpus); !gpus.empty())
    request["gpus"] = gpu_indices(gpus, o.gpus.empty() ? "SLURM_JOB_GPUS" : "--gpus");
  if (o.num_gpus >= 0) request["num_gpus"] = o.num_gpus;
  if (!o.run_dir.empty()) request["run_dir"] = std::filesystem::absolute(o.run_dir).string();
  const auto r = ask("preflight", request.dump());
  if (!r) return kExitNotAsked;  // not "unfit": a prolog must not drain a node for this
  if (o.json) {
    fmt::print("{}\n", r->dump(2));
    return r->value("passed", false) ? kExitOk : kExitFailure;
  }
  return print_reply("preflight", *r, print_preflight);
}

int node_job_end(const std::string& job_arg) {
  const auto job = env_or("SLURM_JOB_ID", job_arg);
  MUSTER_CHECK(!job.empty(), errc::invalid_input,
               "node job-end: which job? give --job ID (in Slurm's epilog, SLURM_JOB_ID is taken)");
  const json request = {
      {"version", 1}, {"request", "record"}, {"event", "job_end"}, {"job", {{"id", job}}}};
  const auto r = ask("job-end", request.dump(), {"not_found"});
  if (!r) return kExitNotAsked;
  if (!r->value("ok", false))
    fmt::print("job {}: this node recorded no step of it\n", job);
  else
    fmt::print("job {}: ended; {} step(s) that never recorded their end closed as cancelled\n", job,
               r->at("closed").get<int>());
  return kExitOk;
}

int node_job(const std::string& job, bool as_json) {
  const json request = {{"version", 1}, {"request", "job"}, {"job", {{"id", job}}}};
  const auto r = ask("job", request.dump(), {"not_found", "denied", "unavailable"});
  if (!r) return kExitNotAsked;
  if (!r->value("ok", false)) {  // an answer all the same: no such job here, or not yours
    fmt::print(stderr, "muster: node job: {}\n", launcher::reply_error_text(r->dump()));
    return kExitFailure;
  }
  if (as_json) {
    fmt::print("{}\n", r->dump(2));
    return kExitOk;
  }
  return print_reply("job", *r, [](const json& reply) {
    fmt::print("{}", node_job_text(reply));
    return kExitOk;
  });
}

}  // namespace

void add_node_verbs(CLI::App& app, verb_action& run) {
  auto* node = app.add_subcommand("node", "ask this node's musterd (MUSTER_DAEMON_SOCKET)");
  node->require_subcommand(1);
  auto status_json = std::make_shared<bool>(false);
  auto* status = node->add_subcommand(
      "status", "the daemon, the node's GPUs and network, the site's policy, recent steps");
  status->add_flag("--json", *status_json, "the daemon's reply as JSON");
  status->callback(
      [status_json, &run] { run = [status_json] { return node_status(*status_json); }; });

  auto env = std::make_shared<env_options>();
  auto* env_cmd = node->add_subcommand(
      "env", "the environment musterd gives this job's workers here, with rules and reasons");
  env_cmd->add_option("args", env->args, "a job file, then section.key=value overrides");
  env_cmd->add_option("--gpus", env->gpus, "the GPUs a step here sees (default: those in /dev)");
  env_cmd
      ->add_option("--nodes", env->nodes,
                   "the job's nodes, of which this is one (default: the Slurm job's, else 1)")
      ->check(CLI::PositiveNumber);
  env_cmd->add_flag("--json", env->json, "the daemon's reply as JSON");
  env_cmd->callback([env, &run] { run = [env] { return node_env(*env); }; });

  auto pre = std::make_shared<preflight_options>();
  auto* pre_cmd = node->add_subcommand(
      "preflight",
      "is this node fit for a job step now (exit 1 when not, 4 when musterd cannot be asked)");
  pre_cmd->add_option("--job", pre->job, "the job id (default: SLURM_JOB_ID)");
  pre_cmd->add_option("--step", pre->step, "the step id (default: SLURM_STEP_ID)");
  pre_cmd->add_option("--gpus", pre->gpus,
                      "the GPU indices given to the step, 0,1,2,3 (default: SLURM_JOB_GPUS)");
  pre_cmd->add_option("--num-gpus", pre->num_gpus, "the number of GPUs, when not their indices");
  pre_cmd->add_option("--run-dir", pre->run_dir, "the run directory the job will write");
  pre_cmd->add_flag("--json", pre->json, "the daemon's reply as JSON");
  pre_cmd->callback([pre, &run] { run = [pre] { return node_preflight(*pre); }; });

  auto job = std::make_shared<std::pair<std::string, bool>>();
  auto* job_cmd = node->add_subcommand(
      "job", "what this node recorded of a job: its owner, steps, preflights and decisions");
  job_cmd->add_option("id", job->first, "the job id (a Slurm job's, or a run's id)")->required();
  job_cmd->add_flag("--json", job->second, "the daemon's reply as JSON");
  job_cmd->callback([job, &run] { run = [job] { return node_job(job->first, job->second); }; });

  auto end_job = std::make_shared<std::string>();
  auto* end_cmd = node->add_subcommand(
      "job-end",
      "the job is over on this node (Slurm's epilog): close its steps that never recorded an end");
  end_cmd->add_option("--job", *end_job, "the job id (default: SLURM_JOB_ID)");
  end_cmd->callback([end_job, &run] { run = [end_job] { return node_job_end(*end_job); }; });
}

}  // namespace muster::cli
