// Preflight: is this node fit to start a job step now? The checks, as a pure function of what
// was probed (preflight_probe.hpp gathers it), so each is unit-tested without a GPU:
//
//   gpus_visible       every GPU the step was given is seen (as many as Slurm allocated)
//   gpu_free_memory    each has at least health.min_free_fraction of its memory free
//   gpu_leftovers      no process of another job (or of none) holds memory on them: the
//                      classic cause of an OOM at step 0
// A step that names no GPUs (a CPU job on a shared node, or a cluster without GPU GRES) is
// checked on every GPU, but the processes of another job Slurm still runs there are that job's
// own: neither leftovers nor memory taken from this step.
//   gpu_ecc            uncorrected ECC errors at most health.max_ecc_uncorrected
//   gpu_xid            no hardware Xid in the kernel log within health.xid_window_s
//   shm_size           /dev/shm at least health.min_shm_mib (NCCL's shared-memory transport)
//   run_dir_writable   the run directory can be written by the job's user, with
//                      health.min_disk_free_mib free
// Each check passes, fails (with what was found and the fix) or is skipped (nothing to check).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "daemon/gpu_inventory.hpp"
#include "daemon/kernel_log.hpp"

namespace muster::daemon {

struct preflight_thresholds {
  double min_free_fraction = 0.9;
  std::int64_t max_ecc_uncorrected = 0;
  int xid_window_s = 86400;
  std::int64_t min_shm_mib = 512;
  std::int64_t min_disk_free_mib = 1024;
};

// What preflight_probe found on the node for one step.
struct preflight_facts {
  std::string job_id;
  gpu_inventory gpus;
  std::vector<int> allocated;  // GPU indices the step was given; empty: by count
  int num_allocated = -1;      // GPUs the step was given; -1: not said
  std::map<std::int64_t, std::string> job_of_pid;  // the job each GPU process belongs to
                                                   // ("" none, absent: gone or not visible)
  // Slurm's word on the other jobs of job_of_pid, asked when the step named no GPUs: true for
  // one still allocated (running, completing, suspended); absent: not asked or no answer
  std::map<std::string, bool> job_allocated;
  kernel_log_read kernel_log;
  std::string shm_dir = "/dev/shm";     // health.shm_dir
  std::optional<std::int64_t> shm_mib;  // nullopt: shm_dir missing
  std::string run_dir;                  // "" when the request named none
  std::string run_dir_problem;          // why the job's user cannot write it; "" when it can
  std::string run_dir_made_under;       // when it does not exist yet: where it would be made
  std::optional<std::int64_t> disk_free_mib;  // where it is, or would be made
};

struct preflight_check {
  std::string id;
  std::string status;  // pass, fail, skip
  std::string detail;
};

struct preflight_result {
  bool passed = true;
  std::vector<preflight_check> checks;
};

preflight_result run_preflight(const preflight_facts& facts, const preflight_thresholds& limits);

}  // namespace muster::daemon
