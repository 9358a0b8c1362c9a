// Which GPU and which CPUs each local rank gets, before any CUDA call: rank r takes the r-th
// visible GPU (from CUDA_VISIBLE_DEVICES as Slurm or the user set it, else the r-th device
// node), and an equal contiguous share of the CPUs this launcher may run on. Pure functions.
// Not here: counting the device nodes (local_gpus.hpp), NUMA distances (NVML, the daemon).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace muster::launcher {

// The CUDA_VISIBLE_DEVICES value of each of `nproc` local ranks. `visible` is the launcher's
// own CUDA_VISIBLE_DEVICES as CUDA reads it (read_slurm_step's parsing), unset when the variable
// is unset; `num_gpus` the device nodes found. Without GPUs (visible empty or num_gpus 0 and
// visible unset) every entry is nullopt: the variable is left as it is. Throws
// errc::invalid_input when nproc exceeds the GPUs, naming both and the fix.
std::vector<std::optional<std::string>> assign_gpus(
    int nproc, const std::optional<std::vector<std::string>>& visible, int num_gpus);

// `allowed` (the CPUs of the launcher's affinity mask, ascending) cut into `nproc` contiguous
// shares as equal as possible (the first ones one larger); a rank gets all of `allowed` when
// there are fewer CPUs than ranks.
std::vector<std::vector<int>> split_cpus(const std::vector<int>& allowed, int nproc);

}  // namespace muster::launcher
