// The GPUs of this machine as the launcher counts them before any CUDA call: the NVIDIA device
// nodes /dev/nvidia0, /dev/nvidia1, ... (what `muster run` starts one rank per, and what
// Slurm's gres.conf names). Not here: NVML queries (memory, health: the daemon), Slurm's view.
#pragma once

#include <filesystem>

namespace muster::launcher {

// Number of /dev/nvidiaN character devices under `dev` (N decimal); 0 when there are none.
int count_local_gpus(const std::filesystem::path& dev = "/dev");

}  // namespace muster::launcher
