// The node's GPUs: see gpu_inventory.hpp.
#include "daemon/gpu_inventory.hpp"

#include <fmt/format.h>

#include <charconv>
#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "daemon/nvml.hpp"

namespace muster::daemon {

using nlohmann::json;

json to_json(const gpu_inventory& inv) {
  json devices = json::array();
  for (const auto& d : inv.devices) {
    json processes = json::array();
    for (const auto& p : d.processes)
      processes.push_back({{"pid", p.pid}, {"used_mib", p.used_mib}});
    devices.push_back({{"index", d.index},
                       {"name", d.name},
                       {"uuid", d.uuid},
                       {"pci_bus_id", d.pci_bus_id},
                       {"compute", fmt::format("{}.{}", d.compute_major, d.compute_minor)},
                       {"memory_total_mib", d.memory_total_mib},
                       {"memory_free_mib", d.memory_free_mib},
                       {"nvlinks_active", d.nvlinks_active},
                       {"nvswitch", d.nvswitch},
                       {"ecc_uncorrected", d.ecc_uncorrected ? json(*d.ecc_uncorrected) : json()},
                       {"processes", processes}});
  }
  json out = {{"source", inv.source},
              {"driver_version", inv.driver_version},
              {"cuda_driver_version", inv.cuda_driver_version},
              {"devices", devices}};
  if (!inv.why_none.empty()) out["why_none"] = inv.why_none;
  return out;
}

namespace {

// Reads one field of the description, naming it on error.
template <class T>
void take(const json& object, const char* key, T& out, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return;
  try {
    out = it->get<T>();
  } catch (const json::exception&) {
    MUSTER_THROW(errc::config, "{}.{}: {} is not the right type", where, key, it->dump());
  }
}

gpu_device device_of(const json& d, const std::string& where) {
  MUSTER_CHECK(d.is_object() && d.contains("index") && d.contains("name"), errc::config,
               "{}: each device is an object with at least \"index\" and \"name\"", where);
  gpu_device g;
  take(d, "index", g.index, where);
  take(d, "name", g.name, where);
  take(d, "uuid", g.uuid, where);
  take(d, "pci_bus_id", g.pci_bus_id, where);
  std::string compute;
  take(d, "compute", compute, where);
  if (!compute.empty()) {
    const auto dot = compute.find('.');
    MUSTER_CHECK(dot != std::string::npos, errc::config,
                 "{}.compute: \"{}\" is not major.minor, such as \"9.0\"", where, compute);
    g.compute_major = std::atoi(compute.substr(0, dot).c_str());
    g.compute_minor = std::atoi(compute.substr(dot + 1).c_str());
  }
  take(d, "memory_total_mib", g.memory_total_mib, where);
  g.memory_free_mib = g.memory_total_mib;
  take(d, "memory_free_mib", g.memory_free_mib, where);
  take(d, "nvlinks_active", g.nvlinks_active, where);
  take(d, "nvswitch", g.nvswitch, where);
  std::uint64_t ecc = 0;
  if (d.contains("ecc_uncorrected") && !d["ecc_uncorrected"].is_null()) {
    take(d, "ecc_uncorrected", ecc, where);
    g.ecc_uncorrected = ecc;
  }
  if (const auto it = d.find("processes"); it != d.end()) {
    MUSTER_CHECK(it->is_array(), errc::config, "{}.processes: expected an array", where);
    for (const auto& p : *it) {
      gpu_process proc;
      MUSTER_CHECK(p.is_object(), errc::config, "{}.processes: expected objects", where);
      take(p, "pid", proc.pid, where + ".processes");
      take(p, "used_mib", proc.used_mib, where + ".processes");
      g.processes.push_back(proc);
    }
  }
  return g;
}

}  // namespace

gpu_inventory read_gpu_description(const std::filesystem::path& file) {
  std::ifstream in(file);
  MUSTER_CHECK(in.good(), errc::config,
               "node.gpu_description: cannot read {}; give an existing JSON file, or \"\" for "
               "NVML",
               file.string());
  std::stringstream text;
  text << in.rdbuf();
  const json doc = json::parse(text.str(), nullptr, false);
  MUSTER_CHECK(!doc.is_discarded() && doc.is_object(), errc::config,
               "{}: not a JSON object (docs/musterd.md shows the format: what muster node status "
               "--json prints under \"gpus\")",
               file.string());
  gpu_inventory inv;
  inv.source = "description";
  const std::string where = file.string();
  take(doc, "driver_version", inv.driver_version, where);
  take(doc, "cuda_driver_version", inv.cuda_driver_version, where);
  if (const auto it = doc.find("devices"); it != doc.end()) {
    MUSTER_CHECK(it->is_array(), errc::config, "{}: \"devices\" must be an array", where);
    for (std::size_t i = 0; i < it->size(); ++i)
      inv.devices.push_back(device_of((*it)[i], fmt::format("{}: devices[{}]", where, i)));
  }
  return inv;
}

gpu_inventory probe_gpus(const std::string& description) {
  if (!description.empty()) return read_gpu_description(description);
  return probe_nvml();
}

std::optional<std::uint64_t> pci_key(std::string_view bus_id) {
  // domain:bus:device[.function], each hexadecimal
  std::uint64_t parts[3] = {0, 0, 0};
  int n = 0;
  std::size_t at = 0;
  while (n < 3 && at <= bus_id.size()) {
    const auto end = bus_id.find_first_of(":.", at);
    const auto piece = bus_id.substr(at, end == std::string_view::npos ? end : end - at);
    const auto r = std::from_chars(piece.data(), piece.data() + piece.size(), parts[n], 16);
    if (piece.empty() || r.ec != std::errc() || r.ptr != piece.data() + piece.size())
      return std::nullopt;
    ++n;
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  if (n != 3) return std::nullopt;
  return (parts[0] << 16) | ((parts[1] & 0xff) << 8) | (parts[2] & 0xff);
}

}  // namespace muster::daemon
