// musterd's job-scoped requests on a real daemon: a job's records are its owner's (and root's);
// another uid, a real client running as `nobody`, is denied them and still reads public status.
// The owner comes from a real Slurm (slurm_cluster.hpp) for Slurm jobs, from the first record
// for others.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/sqlite_db.hpp"
#include "daemon/job_access.hpp"
#include "tests/support/musterd_harness.hpp"
#include "tests/support/slurm_cluster.hpp"
#include "tests/support/unprivileged.hpp"

using muster::daemon::slurm_job_allocated;
using muster::daemon::slurm_lookup;
using muster::test::client;
using muster::test::running_daemon;
using muster::test::slurm_cluster;
using nlohmann::json;

namespace {

// The replies to `requests`, sent one by one by `nobody` on one connection: one JSON per line,
// or "error: ..." when the child could not ask.
std::vector<json> ask_as_nobody(const std::filesystem::path& socket,
                                const std::vector<std::string>& requests) {
  const auto text = muster::test::run_unprivileged([&] {
    client c(socket);
    std::string out;
    for (const auto& r : requests) out += c.ask(r).dump() + "\n";
    return out;
  });
  INFO(text);
  REQUIRE(text.rfind("error: ", 0) != 0);
  std::vector<json> replies;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) replies.push_back(json::parse(line));
  REQUIRE(replies.size() == requests.size());
  return replies;
}

std::string record_start(const std::string& job) {
  return R"({"version": 1, "request": "record", "event": "start", "job": {"id": ")" + job +
         R"(", "step": "0"}, "num_ranks": 2})";
}

std::string job_query(const std::string& job) {
  return R"({"version": 1, "request": "job", "job": {"id": ")" + job + R"("}})";
}

// Whether a client can run as `nobody` against the daemon on `socket` (this process is root and
// nobody can reach the socket once the test directory lets others search it); WARNs why not.
bool nobody_can_ask(const std::filesystem::path& socket) {
  if (::geteuid() != 0) {
    WARN("SKIPPED: needs root, to run a client as another uid");
    return false;
  }
  std::filesystem::permissions(socket.parent_path().parent_path(),
                               std::filesystem::perms::others_exec,
                               std::filesystem::perm_options::add);
  if (!muster::test::reachable_by_nobody(socket)) {
    WARN("SKIPPED: " << socket.string() << " is out of reach of nobody (TMPDIR under /root?)");
    return false;
  }
  return true;
}

}  // namespace

TEST_CASE("another uid is denied a job's records, and still reads the node's public status",
          "[musterd]") {
  running_daemon d({"--mode", "0666"}, "[slurm]\nsqueue = \"\"\n");
  if (!nobody_can_ask(d.socket)) return;
  client root(d.socket);
  REQUIRE(root.ask(record_start("local-1"))["ok"] == true);
  const auto replies = ask_as_nobody(
      d.socket,
      {job_query("local-1"),
       R"({"version": 1, "request": "record", "event": "end", "job": {"id": "local-1", )"
       R"("step": "0"}, "state": "cancelled"})",
       R"({"version": 1, "request": "env", "job": {"id": "local-1", "tp": 2}})",
       R"({"version": 1, "request": "status"})", record_start("local-2"), job_query("local-2")});
  for (int i : {0, 1, 2}) {
    INFO(replies[i].dump());
    CHECK(replies[i]["error"]["code"] == "denied");
    CHECK_THAT(
        replies[i]["error"]["message"].get<std::string>(),
        Catch::Contains("job local-1 belongs to uid 0 (root)") && Catch::Contains("uid 65534"));
  }
  CHECK(replies[3]["ok"] == true);  // public: the steps of every job, as squeue shows them
  CHECK(replies[3]["recent_steps"][0]["job"] == "local-1");
  CHECK_FALSE(replies[3]["recent_steps"][0].contains("run_dir"));  // that is the owner's
  CHECK(replies[4]["ok"] == true);  // nobody's own job
  CHECK(replies[5]["job"]["uid"] == 65534);
  // root reads every job; local-1 was not ended by nobody
  const auto mine = root.ask(job_query("local-1"));
  CHECK(mine["steps"][0]["state"] == "running");
  CHECK(root.ask(job_query("local-2"))["ok"] == true);
}

TEST_CASE(
    "a node store that cannot take an owner gives no job to its first asker: unavailable, and "
    "the owner stays",
    "[musterd]") {
  running_daemon d({"--mode", "0666"}, "[slurm]\nsqueue = \"\"\n");
  if (!nobody_can_ask(d.socket)) return;
  client root(d.socket);
  REQUIRE(root.ask(record_start("local-1"))["ok"] == true);
  // another process holds the store's write lock: nobody's claim of a new id cannot be kept
  muster::store::sqlite_db lock(d.dir / "state/musterd.db", muster::store::open_mode::read_write);
  lock.exec("BEGIN EXCLUSIVE", "hold the write lock");
  auto replies = ask_as_nobody(d.socket, {record_start("local-9"), job_query("local-1")});
  INFO(replies[0].dump() << "\n" << replies[1].dump());
  CHECK(replies[0]["error"]["code"] == "unavailable");
  CHECK_THAT(replies[0]["error"]["message"].get<std::string>(),
             Catch::Contains("cannot record its first recorder"));
  CHECK(replies[1]["error"]["code"] == "denied");  // root's job stays root's
  lock.exec("ROLLBACK", "let go of the write lock");
  // kept now: nobody's own
  replies = ask_as_nobody(d.socket, {record_start("local-9")});
  CHECK(replies[0]["ok"] == true);
  CHECK(root.ask(job_query("local-9"))["job"]["uid"] == 65534);
}

TEST_CASE("a Slurm job's owner is the one Slurm reports, and an id Slurm does not know is refused",
          "[musterd][slurm]") {
  if (auto why = slurm_cluster::unavailable()) {
    WARN("SKIPPED: " << *why);
    return;
  }
  slurm_cluster cluster;
  auto submit = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {"sbatch", "--parsable", "-o", "/dev/null", "--chdir", "/tmp"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(), {"--wrap", "sleep 60"});
    auto r = cluster.command(argv);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return r.out.substr(0, r.out.find_first_of("\n;"));
  };
  const auto roots = submit({});
  const auto nobodys = submit({"--uid=65534", "--gid=65534"});
  const std::string config = "[slurm]\nsqueue = \"" + slurm_cluster::program("squeue") +
                             "\"\nconf = \"" + cluster.conf().string() + "\"\n";
  running_daemon d({"--mode", "0666"}, config);
  if (!nobody_can_ask(d.socket)) return;
  const auto replies = ask_as_nobody(d.socket, {record_start(nobodys), record_start(roots),
                                                record_start("999999"), job_query(nobodys)});
  CHECK(replies[0]["ok"] == true);
  CHECK(replies[1]["error"]["code"] == "denied");
  CHECK_THAT(replies[1]["error"]["message"].get<std::string>(),
             Catch::Contains("belongs to uid 0 (root) (as Slurm reports it)"));
  CHECK(replies[2]["error"]["code"] == "denied");
  CHECK_THAT(replies[2]["error"]["message"].get<std::string>(),
             Catch::Contains("Slurm knows no job 999999"));
  CHECK(replies[3]["job"]["owner_from"] == "slurm");
  CHECK(replies[3]["job"]["uid"] == 65534);
}

TEST_CASE(
    "a step that names no GPUs leaves another running job's GPU memory alone, and finds it a "
    "leftover once that job ended",
    "[musterd][slurm][preflight]") {
  if (auto why = slurm_cluster::unavailable()) {
    WARN("SKIPPED: " << *why);
    return;
  }
  slurm_cluster cluster;
  const auto r = cluster.command(
      {"sbatch", "--parsable", "-o", "/dev/null", "--chdir", "/tmp", "--wrap", "sleep 120"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto other = r.out.substr(0, r.out.find_first_of("\n;"));
  const auto other_id = static_cast<std::uint32_t>(std::stoul(other));
  REQUIRE(
      muster::test::wait_for([&] { return cluster.job_field(other_id, "JobState") == "RUNNING"; },
                             std::chrono::seconds(20)));
  // a process of that job holding 40000 MiB of GPU 1 (a real process; the GPUs are described)
  const auto held = muster::test::spawn_process({"sleep", "600"}, {{{"SLURM_JOB_ID", other}}, {}});
  muster::test::temp_dir dir;
  const json gpus = {{"devices",
                      {{{"index", 0},
                        {"name", "NVIDIA H100"},
                        {"memory_total_mib", 81559},
                        {"memory_free_mib", 81000}},
                       {{"index", 1},
                        {"name", "NVIDIA H100"},
                        {"memory_total_mib", 81559},
                        {"memory_free_mib", 41000},
                        {"processes", {{{"pid", held.pid}, {"used_mib", 40000}}}}}}}};
  muster::test::write_file(dir / "gpus.json", gpus.dump());
  muster::test::write_file(dir / "kmsg", "");
  const slurm_lookup lookup{slurm_cluster::program("squeue"), cluster.conf().string(),
                            std::chrono::milliseconds(5000)};
  CHECK(slurm_job_allocated(lookup, other) == std::optional<bool>(true));
  CHECK(slurm_job_allocated(lookup, "999999") == std::optional<bool>(false));
  CHECK_FALSE(
      slurm_job_allocated({"/nonexistent/squeue", "", std::chrono::milliseconds(500)}, other));
  // several at once, one of them long gone (squeue refuses such a list: each asked alone)
  CHECK(muster::daemon::slurm_jobs_allocated(lookup, {other, "999999", "local-3"}) ==
        std::map<std::string, bool>{{other, true}, {"999999", false}});
  running_daemon d({}, "[node]\ngpu_description = \"" + (dir / "gpus.json").string() +
                           "\"\n[health]\nkernel_log = \"" + (dir / "kmsg").string() +
                           "\"\nmin_shm_mib = 1\n[slurm]\nsqueue = \"" +
                           slurm_cluster::program("squeue") + "\"\nconf = \"" +
                           cluster.conf().string() + "\"\n");
  client c(d.socket);
  const auto preflight = [&](const std::string& gpus_field) {
    return c.ask(R"({"version":1,"request":"preflight","job":{"id":"999998"})" + gpus_field + "}");
  };
  const auto leftovers = [](const json& reply) {
    for (const auto& check : reply["checks"])
      if (check["check"] == "gpu_leftovers") return check;
    return json();
  };
  // no GPUs named (a CPU job beside a GPU job): the other job's memory is its own
  auto reply = preflight("");
  INFO(reply.dump());
  CHECK(reply["passed"] == true);
  CHECK_THAT(leftovers(reply)["detail"].get<std::string>(),
             Catch::Contains("job " + other + " on GPU 1 running there"));
  // GPU 1 named: another job holds it, whoever runs
  reply = preflight(R"(, "gpus": [1])");
  CHECK(reply["passed"] == false);
  CHECK_THAT(leftovers(reply)["detail"].get<std::string>(),
             Catch::Contains("(of job " + other + ") holds 40000 MiB"));
  // the job ended and its process stayed: a leftover, on a step that names no GPUs too
  REQUIRE(cluster.command({"scancel", other}).exit_code == 0);
  REQUIRE(muster::test::wait_for(
      [&] { return slurm_job_allocated(lookup, other) == std::optional<bool>(false); },
      std::chrono::seconds(20)));
  reply = preflight("");
  CHECK(reply["passed"] == false);
  CHECK_THAT(leftovers(reply)["detail"].get<std::string>(),
             Catch::Contains("(of job " + other + ") holds 40000 MiB"));
  ::kill(held.pid, SIGKILL);
  muster::test::wait_process(held.pid);
}
