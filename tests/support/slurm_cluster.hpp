// slurm_cluster: a real Slurm on loopback for one test. slurmctld and two slurmd playing the
// nodes gpu-a01 and gpu-a02 (NodeHostname=localhost, NodeAddr=127.0.0.1, 2 CPUs each, no GRES)
// run as root from a fresh temporary directory with their own slurm.conf, ports and job ids,
// so tests that run at the same time (ctest -j) never meet. munged is the running one when
// `munge -n` works, else a private one (its own key and socket in the directory, named by
// AuthInfo in slurm.conf), so /etc/munge and /run/munge are never touched.
// SPANK plugins, a prolog and an epilog come from slurm_cluster_options.
// Not here: GPUs (no gres.conf), accounting.
//
//   if (auto why = slurm_cluster::unavailable()) { WARN("SKIPPED: " << *why); return; }
//   slurm_cluster cluster;
//   auto r = run_process({slurm_cluster::program("srun"), "-N2", "hostname"}, cluster.env());
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

// In a TEST_CASE: prints "SKIPPED: <why>" (ctest reads it as skipped) and returns when no
// cluster can run here.
#define MUSTER_SKIP_WITHOUT_SLURM()                              \
  if (auto why = ::muster::test::slurm_cluster::unavailable()) { \
    WARN("SKIPPED: " << *why);                                   \
    return;                                                      \
  }

namespace muster::test {

// Polls `done` every 20 ms until it holds or `limit` passes; returns whether it held.
bool wait_for(const std::function<bool()>& done, std::chrono::steady_clock::duration limit);

struct slurm_cluster_options {
  // AuthInfo=cred_expire: how long a job step's credential is valid, and so how long a
  // requeued job waits before it may start again (this + 1 s; Slurm's guard against starting
  // while the nodes still hold the revoked credential). Slurm's default is 120; 5 is the least
  // it takes.
  int cred_expire_s = 120;
  // plugstack.conf's text (PlugStackConfig=<dir>/plugstack.conf); empty: no SPANK plugins.
  // srun and each job step read the file when they start, so a test may rewrite it between
  // steps (plugstack_conf() is its path).
  std::string plugstack;
  // Prolog= and Epilog= (run by slurmd as root on each node of a job; PrologFlags=Alloc, so the
  // prolog runs when the job is allocated, not at its first step); empty: none.
  std::string prolog, epilog;
  // More of the partition's line (e.g. "DefaultTime=4"); empty: MaxTime=INFINITE only.
  std::string partition;
};

class slurm_cluster {
 public:
  // Why no cluster can be started here (not root, a Slurm or munge program missing), or
  // std::nullopt when it can. Tests print "SKIPPED: <reason>" and return.
  static std::optional<std::string> unavailable();

  // The full path of a Slurm or munge program (PATH, then /usr/sbin and /sbin); throws
  // std::runtime_error when it is not installed.
  static std::string program(const std::string& name);

  // Brings the cluster up and returns once both nodes are idle (well under a second here).
  // Throws std::runtime_error naming the daemon that did not come up, with the daemons' logs;
  // whatever it had started is stopped first.
  explicit slurm_cluster(const slurm_cluster_options& options = {});
  // Cancels the cluster's jobs, then stops exactly the daemons this object started.
  ~slurm_cluster();
  slurm_cluster(const slurm_cluster&) = delete;
  slurm_cluster& operator=(const slurm_cluster&) = delete;

  // The environment for Slurm commands: SLURM_CONF set to this cluster's config, every other
  // SLURM_* and the SBATCH_/SRUN_/SALLOC_/SQUEUE_/SINFO_/SCANCEL_ inputs removed (a test run
  // inside a real Slurm job must not send its commands there).
  const env_change& env() const { return env_; }
  // Runs a Slurm command (`program(argv[0])` with argv[1..]) in env() and returns its result.
  process_result command(std::vector<std::string> argv) const;

  const std::filesystem::path& dir() const { return dir_.path(); }
  const std::filesystem::path& conf() const { return conf_; }
  std::filesystem::path plugstack_conf() const { return dir_.path() / "plugstack.conf"; }
  // The id of the cluster's first job (FirstJobId); later jobs count up from it.
  std::uint32_t first_job_id() const { return first_job_id_; }
  static const std::vector<std::string>& nodes();
  // The pids of the daemons this object started and has not stopped.
  std::vector<pid_t> daemon_pids() const;

  // `scontrol show job|node -o <id>` as NAME=value fields (the first of a name wins; values
  // with spaces, such as a node's Reason, keep only their first word: use the raw text).
  std::map<std::string, std::string> job_fields(std::uint32_t job_id) const;
  std::map<std::string, std::string> node_fields(const std::string& node) const;
  // One field of `scontrol show job -o`, or "(none)" when Slurm no longer shows the job.
  std::string job_field(std::uint32_t job_id, const std::string& name) const;
  // Whether a JobState is one a job does not leave (COMPLETED, FAILED, CANCELLED, TIMEOUT).
  static bool finished(const std::string& job_state);

  // The last lines of every daemon's log, for a failing test's message.
  std::string log_tail(std::size_t num_lines = 25) const;

 private:
  struct daemon {
    std::string name;
    pid_t pid = -1;
  };

  void bring_up();
  void start_munged();
  void write_config() const;
  pid_t start(const std::string& name, std::vector<std::string> argv);
  // Polls `ready` every 20 ms until it is true; throws when a daemon exits or 15 s pass.
  template <class Ready>
  void wait_until(const std::string& what, Ready ready);
  void cancel_jobs();
  void stop(std::vector<daemon> daemons);
  void stop_all();

  temp_dir dir_;  // first member: removed only after every daemon is stopped
  slurm_cluster_options options_;
  std::filesystem::path conf_;
  std::filesystem::path munge_socket_;  // empty: the running munged
  int ctld_port_ = 0;
  std::vector<int> node_ports_;
  std::uint32_t first_job_id_ = 0;
  env_change env_;
  std::vector<daemon> daemons_;  // in start order
};

}  // namespace muster::test
