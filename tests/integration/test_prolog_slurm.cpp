// slurm/prolog/muster-prolog and slurm/epilog/muster-epilog as a real slurmd runs them (Prolog=,
// Epilog=, PrologFlags=Alloc in a loopback Slurm, tests/support/slurm_cluster.hpp) against real
// musterd daemons: a fit node runs the job and its preflight is recorded; an unfit one is
// drained with the failed check as the reason and the job does not run there; a daemon that
// cannot be asked lets the job run; the epilog closes a step that never recorded its end.
// Skipped, with "SKIPPED: <reason>", where the cluster cannot run (not root, no Slurm).
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "tests/support/musterd_harness.hpp"
#include "tests/support/slurm_cluster.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using muster::test::slurm_cluster;
using muster::test::wait_for;

namespace {

const std::string kMuster = std::string(MUSTER_BIN_DIR) + "/muster";
const std::string kSource = MUSTER_SOURCE_DIR;

// A node with no GPUs and a quiet kernel log: preflight passes, or fails on /dev/shm when
// `min_shm_mib` is more than any machine has.
std::string daemon_config(const fs::path& kernel_log, long long min_shm_mib) {
  return "[node]\ngpus = 0\n[health]\nkernel_log = \"" + kernel_log.string() +
         "\"\nmin_shm_mib = " + std::to_string(min_shm_mib) + "\n[slurm]\nsqueue = \"\"\n";
}

std::string job_state(const slurm_cluster& cluster, std::uint32_t job) {
  return cluster.job_field(job, "JobState");
}

}  // namespace

TEST_CASE("the prolog drains a node musterd finds unfit, the epilog closes steps left running",
          "[slurm][prolog]") {
  MUSTER_SKIP_WITHOUT_SLURM();
  muster::test::temp_dir dir("muster-prolog");
  const auto kernel_log = dir / "kmsg";
  muster::test::write_file(kernel_log, "");
  muster::test::running_daemon fit({}, daemon_config(kernel_log, 1));
  muster::test::running_daemon unfit({}, daemon_config(kernel_log, 1000000000));

  // slurmd runs the scripts with its own environment: a wrapper names the settings file, which
  // each run reads again, so the test points the scripts at one daemon or another
  const auto defaults = dir / "muster-slurm";
  auto use_daemon = [&](const std::string& socket) {
    muster::test::write_file(defaults,
                             "MUSTER_BIN=" + kMuster + "\nMUSTER_DAEMON_SOCKET=" + socket + "\n");
  };
  use_daemon(fit.socket.string());
  for (const char* script : {"prolog", "epilog"}) {
    const auto wrapper = dir / (std::string(script) + ".sh");
    muster::test::write_file(wrapper, "#!/bin/sh\nMUSTER_SLURM_DEFAULTS='" + defaults.string() +
                                          "' exec '" + kSource + "/slurm/" + script + "/muster-" +
                                          script + "'\n");
    fs::permissions(wrapper, fs::perms::owner_all);
  }
  muster::test::slurm_cluster_options options;
  options.prolog = (dir / "prolog.sh").string();
  options.epilog = (dir / "epilog.sh").string();
  slurm_cluster cluster(options);
  const auto first = cluster.first_job_id();

  // 1. Fit nodes: the job runs; each node's preflight is recorded under the job. A step that
  // records its start and never its end (a launcher killed with SIGKILL) is closed by the
  // epilog.
  REQUIRE(cluster.command({"sbatch", "-N2", "-o", "/dev/null", "--wrap", "sleep 2"}).exit_code ==
          0);
  if (!wait_for([&] { return job_state(cluster, first) == "RUNNING"; }, 20s))
    FAIL("job " << first << " is " << job_state(cluster, first) << "\n" << cluster.log_tail());
  muster::test::client c(fit.socket);
  const auto job = std::to_string(first);
  REQUIRE(c.ask(R"({"version":1,"request":"record","event":"start","job":{"id":")" + job +
                R"(","step":"0"},"num_ranks":4})")["ok"] == true);
  auto recorded = [&] {
    return c.ask(R"({"version":1,"request":"job","job":{"id":")" + job + "\"}}");
  };
  if (!wait_for([&] { return recorded()["steps"][0]["state"] == "cancelled"; }, 30s))
    FAIL("the epilog did not close the step: " << recorded().dump() << "\n" << cluster.log_tail());
  const auto record = recorded();
  INFO(record.dump());
  // the epilog runs while the job is COMPLETING
  CHECK(wait_for([&] { return job_state(cluster, first) == "COMPLETED"; }, 20s));
  CHECK_THAT(record["steps"][0]["message"].get<std::string>(),
             Catch::Contains("ended on this node before the step recorded its end"));
  REQUIRE(record["preflights"].size() == 2);  // one per node (both ask this daemon)
  for (const auto& p : record["preflights"]) CHECK(p["passed"] == true);

  // 2. No daemon to ask: the prolog logs it and the job runs
  use_daemon((dir / "gone.sock").string());
  REQUIRE(cluster.command({"sbatch", "-N1", "-w", "gpu-a01", "-o", "/dev/null", "--wrap", "true"})
              .exit_code == 0);
  if (!wait_for([&] { return job_state(cluster, first + 1) == "COMPLETED"; }, 20s))
    FAIL("job " << first + 1 << " is " << job_state(cluster, first + 1) << "\n"
                << cluster.log_tail());

  // 2b. A CLI that fails without a verdict (exit 1, no "preflight FAILED"): logged, no drain
  muster::test::write_file(defaults, "MUSTER_BIN=/bin/false\n");
  REQUIRE(cluster.command({"sbatch", "-N1", "-w", "gpu-a02", "-o", "/dev/null", "--wrap", "true"})
              .exit_code == 0);
  if (!wait_for([&] { return job_state(cluster, first + 2) == "COMPLETED"; }, 20s))
    FAIL("job " << first + 2 << " is " << job_state(cluster, first + 2) << "\n"
                << cluster.log_tail());
  CHECK(cluster.node_fields("gpu-a02")["State"].find("DRAIN") == std::string::npos);

  // 3. An unfit node: drained with the failed check as the reason; the job does not run there
  use_daemon(unfit.socket.string());
  REQUIRE(cluster.command({"sbatch", "-N1", "-w", "gpu-a02", "-o", "/dev/null", "--wrap", "true"})
              .exit_code == 0);
  auto drained = [&] {
    return cluster.node_fields("gpu-a02")["State"].find("DRAIN") != std::string::npos;
  };
  if (!wait_for(drained, 20s))
    FAIL("gpu-a02 was not drained: " << cluster.command({"scontrol", "show", "node", "gpu-a02"}).out
                                     << cluster.log_tail());
  const auto node = cluster.command({"scontrol", "show", "node", "gpu-a02"}).out;
  INFO(node << "job " << first + 3 << ": " << job_state(cluster, first + 3));
  CHECK_THAT(node, Catch::Contains("Reason=muster preflight: shm_size /dev/shm holds"));
  CHECK(job_state(cluster, first + 3) != "COMPLETED");
  muster::test::client u(unfit.socket);
  const auto unfit_record =
      u.ask(R"({"version":1,"request":"job","job":{"id":")" + std::to_string(first + 3) + "\"}}");
  REQUIRE(unfit_record["preflights"].size() == 1);
  CHECK(unfit_record["preflights"][0]["passed"] == false);
  // the other node stays in service
  CHECK(cluster.node_fields("gpu-a01")["State"].find("DRAIN") == std::string::npos);
}
