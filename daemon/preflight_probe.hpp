// Gathering what preflight.hpp checks, from the node itself: the GPUs (NVML or the description),
// the job each GPU process belongs to (/proc/<pid>/cgroup, then its environment), the kernel
// log's Xids, /dev/shm's size and whether the job's user can write its run directory. Reads
// only; blocks for as long as NVML and the file system take.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/job_access.hpp"
#include "daemon/preflight.hpp"

namespace muster::daemon {

// Where preflight looks (the [health] section of musterd.toml, and node.gpu_description).
struct preflight_sources {
  std::string gpu_description;  // "" : NVML
  std::string kernel_log = "/dev/kmsg";
  std::string shm_dir = "/dev/shm";
};

// What the step asked to have checked.
struct preflight_ask {
  std::string job_id;
  std::vector<int> gpus;  // indices given to the step; empty: by count
  int num_gpus = -1;      // -1: not said
  std::string run_dir;    // "" : none
  uid_t uid = 0;          // whose run directory it is
};

// `slurm` is asked whether the other jobs holding GPU memory still run, when the step named no
// GPUs (preflight.hpp).
preflight_facts probe_preflight(const preflight_ask& ask, const preflight_sources& sources,
                                const preflight_thresholds& limits, const slurm_lookup& slurm);

// The job a process belongs to: "4242" from a Slurm cgroup (".../job_4242/...") or its
// SLURM_JOB_ID, a local run's MUSTER_RUN_ID, "" for none; nullopt when the process is gone.
// `proc` is /proc (a parameter for tests).
std::optional<std::string> job_of_process(std::int64_t pid, const std::string& proc = "/proc");

struct run_dir_check {
  std::string problem;                   // "" when `uid` can create files there
  std::optional<std::int64_t> free_mib;  // free space where it is (or would be made)
  std::string made_under;  // when it does not exist: the deepest directory above it; else ""
};

// Whether `uid` can create files in `dir`, or when it does not exist yet, in the deepest
// directory above it that uid can see: checked as uid (a forked child with its groups), so the
// answer holds on NFS with root_squash and says nothing root alone could see.
run_dir_check check_run_dir(const std::string& dir, uid_t uid);

}  // namespace muster::daemon
