// The node's network as NCCL would use it, read from sysfs: interfaces that are up, not
// loopback and not a container or VM bridge (docker*, veth*, virbr*, br-*, ...; /sys/class/net),
// and InfiniBand/RoCE HCAs with an active port
// (/sys/class/infiniband). The GPU policy sets NCCL_SOCKET_IFNAME and NCCL_IB_HCA from them.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace muster {

struct node_network {
  std::vector<std::string> interfaces;  // sorted: "eth0", "ib0"
  std::vector<std::string> ib_hcas;     // sorted: "mlx5_0", "mlx5_1"
};

// Reads `sys` (a sysfs root; tests pass a directory laid out like one). Missing or unreadable
// entries count as absent: a node without InfiniBand has no /sys/class/infiniband.
node_network probe_node_network(const std::filesystem::path& sys = "/sys");

}  // namespace muster
