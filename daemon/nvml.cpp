// NVML, loaded at run time: see nvml.hpp.
//
// The declarations below follow NVML's public C API (nvml.h, stable ABI since CUDA 11): every
// call returns nvmlReturn_t (0 is success), devices are opaque handles, and the structs are
// the versions named in each function's symbol.
#include "daemon/nvml.hpp"

#include <dlfcn.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>

namespace muster::daemon {
namespace {

using nvml_return = int;                     // nvmlReturn_t
using nvml_device = struct nvml_device_st*;  // nvmlDevice_t

constexpr nvml_return kSuccess = 0;
constexpr nvml_return kInsufficientSize = 7;
constexpr int kMaxNvLinks = 18;             // NVML_NVLINK_MAX_LINKS
constexpr int kMemoryErrorUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatileEcc = 0;             // NVML_VOLATILE_ECC
constexpr int kNvLinkDeviceSwitch = 2;      // NVML_NVLINK_DEVICE_TYPE_SWITCH

struct nvml_memory {  // nvmlMemory_t
  unsigned long long total, free, used;
};

struct nvml_pci_info {  // nvmlPciInfo_t (v3)
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

// nvmlProcessInfo_v2_t, what nvmlDeviceGetComputeRunningProcesses_v2 writes. Not _v3: drivers
// R535 to R545 write a larger struct through it (with usedGpuCcProtectedMemory), so its entries
// cannot be read with one declaration.
struct nvml_process_info {
  unsigned pid;
  unsigned long long used_gpu_memory;
  unsigned gpu_instance_id, compute_instance_id;
};

struct nvml_process_info_v1 {  // nvmlProcessInfo_v1_t, for drivers without _v2
  unsigned pid;
  unsigned long long used_gpu_memory;
};

struct nvml_api {
  void* handle = nullptr;
  nvml_return (*init)() = nullptr;
  nvml_return (*shutdown)() = nullptr;
  const char* (*error_string)(nvml_return) = nullptr;
  nvml_return (*driver_version)(char*, unsigned) = nullptr;
  nvml_return (*cuda_driver_version)(int*) = nullptr;
  nvml_return (*device_count)(unsigned*) = nullptr;
  nvml_return (*device_by_index)(unsigned, nvml_device*) = nullptr;
  nvml_return (*name)(nvml_device, char*, unsigned) = nullptr;
  nvml_return (*uuid)(nvml_device, char*, unsigned) = nullptr;
  nvml_return (*pci_info)(nvml_device, nvml_pci_info*) = nullptr;
  nvml_return (*memory_info)(nvml_device, nvml_memory*) = nullptr;
  nvml_return (*compute_capability)(nvml_device, int*, int*) = nullptr;
  nvml_return (*nvlink_state)(nvml_device, unsigned, int*) = nullptr;
  nvml_return (*nvlink_remote_type)(nvml_device, unsigned, int*) = nullptr;
  nvml_return (*total_ecc_errors)(nvml_device, int, int, unsigned long long*) = nullptr;
  nvml_return (*running_processes)(nvml_device, unsigned*, nvml_process_info*) = nullptr;
  nvml_return (*running_processes_v1)(nvml_device, unsigned*, nvml_process_info_v1*) = nullptr;
  std::string why_not;  // set when the library or a required call is missing
};

template <class F>
void bind(void* handle, const char* symbol, F& out) {
  out = reinterpret_cast<F>(::dlsym(handle, symbol));
}

nvml_api load(const std::string& library) {
  nvml_api api;
  api.handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!api.handle) {
    const char* why = ::dlerror();
    api.why_not = fmt::format("{} not loaded ({}): no NVIDIA driver on this node", library,
                              why ? why : "no reason given");
    return api;
  }
  bind(api.handle, "nvmlInit_v2", api.init);
  bind(api.handle, "nvmlShutdown", api.shutdown);
  bind(api.handle, "nvmlErrorString", api.error_string);
  bind(api.handle, "nvmlSystemGetDriverVersion", api.driver_version);
  bind(api.handle, "nvmlSystemGetCudaDriverVersion", api.cuda_driver_version);
  bind(api.handle, "nvmlDeviceGetCount_v2", api.device_count);
  bind(api.handle, "nvmlDeviceGetHandleByIndex_v2", api.device_by_index);
  bind(api.handle, "nvmlDeviceGetName", api.name);
  bind(api.handle, "nvmlDeviceGetUUID", api.uuid);
  bind(api.handle, "nvmlDeviceGetPciInfo_v3", api.pci_info);
  bind(api.handle, "nvmlDeviceGetMemoryInfo", api.memory_info);
  bind(api.handle, "nvmlDeviceGetCudaComputeCapability", api.compute_capability);
  bind(api.handle, "nvmlDeviceGetNvLinkState", api.nvlink_state);
  bind(api.handle, "nvmlDeviceGetNvLinkRemoteDeviceType", api.nvlink_remote_type);
  bind(api.handle, "nvmlDeviceGetTotalEccErrors", api.total_ecc_errors);
  bind(api.handle, "nvmlDeviceGetComputeRunningProcesses_v2", api.running_processes);
  bind(api.handle, "nvmlDeviceGetComputeRunningProcesses", api.running_processes_v1);
  if (!api.init || !api.shutdown || !api.device_count || !api.device_by_index || !api.name ||
      !api.memory_info)
    api.why_not = fmt::format(
        "{} lacks nvmlInit_v2 or another call musterd needs: the driver "
        "is older than CUDA 11's",
        library);
  return api;
}

std::string error_text(const nvml_api& api, nvml_return r) {
  return api.error_string ? fmt::format("{} ({})", api.error_string(r), r)
                          : fmt::format("NVML error {}", r);
}

// The processes on `d` through `query` (one of the two process calls), with `Info` its struct.
template <class Info, class Query>
std::vector<gpu_process> processes_through(Query query, nvml_device d) {
  std::vector<gpu_process> out;
  std::vector<Info> infos(64);
  for (int attempt = 0; attempt < 4; ++attempt) {
    unsigned count = static_cast<unsigned>(infos.size());
    const auto r = query(d, &count, infos.data());
    if (r == kInsufficientSize) {
      infos.resize(count + 16);
      continue;
    }
    if (r != kSuccess) return out;
    for (unsigned i = 0; i < std::min<unsigned>(count, static_cast<unsigned>(infos.size())); ++i)
      out.push_back({infos[i].pid, infos[i].used_gpu_memory / (1024 * 1024)});
    return out;
  }
  return out;
}

std::vector<gpu_process> processes_of(const nvml_api& api, nvml_device d) {
  if (api.running_processes) return processes_through<nvml_process_info>(api.running_processes, d);
  if (api.running_processes_v1)
    return processes_through<nvml_process_info_v1>(api.running_processes_v1, d);
  return {};
}

gpu_device device_of(const nvml_api& api, unsigned index, nvml_device d) {
  gpu_device g;
  g.index = static_cast<int>(index);
  std::array<char, 96> text{};
  if (api.name(d, text.data(), text.size()) == kSuccess) g.name = text.data();
  if (api.uuid && api.uuid(d, text.data(), text.size()) == kSuccess) g.uuid = text.data();
  nvml_pci_info pci{};
  if (api.pci_info && api.pci_info(d, &pci) == kSuccess) g.pci_bus_id = pci.bus_id;
  nvml_memory memory{};
  if (api.memory_info(d, &memory) == kSuccess) {
    g.memory_total_mib = memory.total / (1024 * 1024);
    g.memory_free_mib = memory.free / (1024 * 1024);
  }
  if (api.compute_capability) api.compute_capability(d, &g.compute_major, &g.compute_minor);
  for (int link = 0; api.nvlink_state && link < kMaxNvLinks; ++link) {
    int active = 0;
    if (api.nvlink_state(d, static_cast<unsigned>(link), &active) != kSuccess || !active) continue;
    ++g.nvlinks_active;
    int remote = -1;
    if (api.nvlink_remote_type &&
        api.nvlink_remote_type(d, static_cast<unsigned>(link), &remote) == kSuccess &&
        remote == kNvLinkDeviceSwitch)
      g.nvswitch = true;
  }
  unsigned long long ecc = 0;
  if (api.total_ecc_errors &&
      api.total_ecc_errors(d, kMemoryErrorUncorrected, kVolatileEcc, &ecc) == kSuccess)
    g.ecc_uncorrected = ecc;
  g.processes = processes_of(api, d);
  return g;
}

}  // namespace

gpu_inventory probe_nvml(const std::string& library) {
  static const nvml_api api = load(library);
  gpu_inventory inv;
  inv.source = "none";
  if (!api.why_not.empty()) {
    inv.why_none = api.why_not;
    return inv;
  }
  if (const auto r = api.init(); r != kSuccess) {
    inv.why_none = fmt::format("nvmlInit failed: {}", error_text(api, r));
    return inv;
  }
  inv.source = "nvml";
  std::array<char, 96> text{};
  if (api.driver_version && api.driver_version(text.data(), text.size()) == kSuccess)
    inv.driver_version = text.data();
  if (api.cuda_driver_version) api.cuda_driver_version(&inv.cuda_driver_version);
  unsigned count = 0;
  if (const auto r = api.device_count(&count); r != kSuccess)
    inv.why_none = fmt::format("nvmlDeviceGetCount failed: {}", error_text(api, r));
  for (unsigned i = 0; i < count; ++i) {
    nvml_device d = nullptr;
    if (api.device_by_index(i, &d) == kSuccess) inv.devices.push_back(device_of(api, i, d));
  }
  api.shutdown();
  return inv;
}

}  // namespace muster::daemon
