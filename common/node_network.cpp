// The node's network from sysfs: see node_network.hpp.
#include "common/node_network.hpp"

#include <algorithm>
#include <fstream>

namespace muster {
namespace {

namespace fs = std::filesystem;

std::string first_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

// The entries of a sysfs class directory, sorted; none when it does not exist.
std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

// IFF_LOOPBACK in /sys/class/net/<if>/flags (hexadecimal)
bool loopback(const fs::path& interface) {
  try {
    return (std::stoul(first_line(interface / "flags"), nullptr, 16) & 0x8) != 0;
  } catch (const std::exception&) {
    return false;
  }
}

// Container and VM bridges: never the way to another node (NCCL leaves docker* out too).
bool virtual_bridge(const std::string& name) {
  for (const char* prefix : {"docker", "veth", "virbr", "br-", "cni", "flannel", "vxlan"})
    if (name.starts_with(prefix)) return true;
  return false;
}

}  // namespace

node_network probe_node_network(const fs::path& sys) {
  node_network out;
  for (const auto& interface : entries(sys / "class" / "net"))
    if (first_line(interface / "operstate") == "up" && !loopback(interface) &&
        !virtual_bridge(interface.filename().string()))
      out.interfaces.push_back(interface.filename().string());
  for (const auto& hca : entries(sys / "class" / "infiniband")) {
    // ports/<n>/state reads "4: ACTIVE" for a port in use
    const auto ports = entries(hca / "ports");
    if (std::any_of(ports.begin(), ports.end(), [](const fs::path& port) {
          return first_line(port / "state").find("ACTIVE") != std::string::npos;
        }))
      out.ib_hcas.push_back(hca.filename().string());
  }
  return out;
}

}  // namespace muster
