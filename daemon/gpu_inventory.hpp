// The node's GPUs as musterd sees them at one moment: model, memory (total and free), compute
// capability, active NVLinks, uncorrected ECC errors and the processes holding memory on each,
// with the driver and CUDA versions. From NVML (nvml.hpp), or from a description file
// (node.gpu_description) for nodes without NVML and for tests. A node without either has none
// and musterd serves everything else.
//
// The description file is the JSON that `muster node status --json` prints under "gpus":
//   {"driver_version": "570.86.15", "cuda_driver_version": 12080,
//    "devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-...",
//                 "pci_bus_id": "00000000:3B:00.0", "compute": "9.0",
//                 "memory_total_mib": 81559, "memory_free_mib": 81000, "nvlinks_active": 18,
//                 "nvswitch": true, "ecc_uncorrected": 0, "processes": [{"pid": 4242, "used_mib":
//                 512}]}]}
// Every device field but "index" and "name" is optional.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace muster::daemon {

struct gpu_process {
  std::int64_t pid = 0;
  std::uint64_t used_mib = 0;
};

struct gpu_device {
  int index = 0;
  std::string name;
  std::string uuid;
  std::string pci_bus_id;  // "00000000:3B:00.0" as NVML writes it
  int compute_major = 0;
  int compute_minor = 0;
  std::uint64_t memory_total_mib = 0;
  std::uint64_t memory_free_mib = 0;
  int nvlinks_active = 0;
  bool nvswitch = false;                         // an active NVLink ends at an NVSwitch
  std::optional<std::uint64_t> ecc_uncorrected;  // volatile count; nullopt without ECC
  std::vector<gpu_process> processes;
};

struct gpu_inventory {
  std::string source;    // "nvml", "description", or "none"
  std::string why_none;  // when source is "none": why (no libnvidia-ml.so.1, nvmlInit failed)
  std::string driver_version;
  int cuda_driver_version = 0;  // 12080 for CUDA 12.8
  std::vector<gpu_device> devices;
};

// The inventory as JSON (the description file's format, plus "source" and "why_none").
nlohmann::json to_json(const gpu_inventory& inventory);

// Reads a description file. Throws errc::config naming the file and the field that is wrong.
gpu_inventory read_gpu_description(const std::filesystem::path& file);

// The GPUs now: from `description` when it is not empty, else from NVML.
gpu_inventory probe_gpus(const std::string& description);

// PCI domain, bus and device of a bus id ("00000000:3B:00.0", "0000:3b:00"); nullopt when it
// does not read as one. Used to tie kernel-log lines to GPUs.
std::optional<std::uint64_t> pci_key(std::string_view bus_id);

}  // namespace muster::daemon
