// What Slurm says of one job now, for a run its store still calls running. A launcher killed
// with its job (srun or the batch shell SIGKILLed, a node lost, scancel --signal=KILL) records
// no end, and its ranks on other hosts cannot be looked for by pid: Slurm's word that the job
// is over makes such a run lost (run_status.hpp), its running ranks gone.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "launcher/status/run_status.hpp"

namespace muster::launcher::status {

struct slurm_job_state {
  enum class kind { unknown, alive, ended };
  kind is = kind::unknown;  // unknown: no Slurm here, or squeue failed
  std::string state;        // squeue's %T: "FAILED", "CANCELLED", ...; or why it is unknown
};

// `squeue --jobs=<id> --states=all --noheader --format=%T`'s answer: a state word a line (an
// array job has one per task: ended when every one is); a job Slurm no longer knows ("Invalid
// job id specified", after MinJobAge) is ended too. squeue --clusters's "CLUSTER: <name>" line
// is skipped.
slurm_job_state parse_job_state(int exit_code, std::string_view output);

// The ClusterName of `scontrol show config`'s output ("ClusterName = gpu-b"); "" without one.
std::string parse_cluster_name(std::string_view config);

// Asks squeue of job `id` ("4242", "4242_3") on `cluster` (the run's SLURM_CLUSTER_NAME; unset:
// this host's cluster), waiting at most `timeout` a question. `squeue --clusters` needs slurmdbd,
// which a site of one cluster may not run: where it cannot answer, the plain squeue asks, but
// only when this host's cluster (scontrol show config) is the run's; else the state is unknown,
// never another cluster's word about a job of the same id.
slurm_job_state ask_job_state(const std::string& id, const std::optional<std::string>& cluster,
                              std::chrono::milliseconds timeout);

// A run the store says is running, whose Slurm job `said` is over: lost, its running ranks
// gone, and `lost_why` says what Slurm said; a run of one task per rank, which records no end
// of its own, is not lost but ended, as `slurm_ended` says. A run whose end is recorded has the
// ranks still recorded running gone (their node's launcher died with it). Anything else leaves
// `s` as it is,
// and so does a running rank whose process is alive on this host (the squeue of another
// cluster, an id used again).
void apply_job_state(run_status& s, const slurm_job_state& said);

// Whether Slurm's word is worth asking for `s`: recorded running under Slurm, not lost
// already; or ended, with ranks still recorded running (a node's launcher gone with it).
bool asks_slurm(const run_status& s);

// ask_job_state and apply_job_state where asks_slurm says so.
void check_with_slurm(run_status& s, std::chrono::milliseconds timeout);

}  // namespace muster::launcher::status
