// The GPUs of this machine as the launcher counts them before any CUDA call: the NVIDIA device
// nodes /dev/nvidia0, /dev/nvidia1, ... (what `muster run` starts one rank per, and what
// Slurm's gres.conf names). Not here: NVML queries (memory, health: the daemon), Slurm's view.
#pragma once

#include <filesystem>

namespace muster::launcher {

// Number of /dev/nvidiaN character devices under `dev` (N decimal); 0 when there are none.
int count_local_gpus(const std::filesystem::path& dev = "/dev");

// Ranks `muster run` starts on this machine: launch.nproc when > 0, else one per GPU, else 2.
inline int local_ranks(int nproc, int num_gpus) {
  return nproc > 0 ? nproc : num_gpus > 0 ? num_gpus : 2;
}

}  // namespace muster::launcher
