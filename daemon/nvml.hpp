// NVML, loaded at run time: libnvidia-ml.so.1 (the driver's library) opened with dlopen and the
// few calls musterd uses declared here (there is no NVML header on build machines). A node
// without the library, or whose nvmlInit fails, has no GPUs; musterd still serves the rest.
#pragma once

#include <string>

#include "daemon/gpu_inventory.hpp"

namespace muster::daemon {

// The node's GPUs from NVML now (source "nvml"), or none (source "none", why_none says why).
// Opens the library on the first call and keeps it; nvmlInit/nvmlShutdown around each probe.
// Thread-compatible: musterd calls it from its store thread only.
gpu_inventory probe_nvml(const std::string& library = "libnvidia-ml.so.1");

}  // namespace muster::daemon
