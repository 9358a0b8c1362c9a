// Tests of the node's network read from sysfs (common/node_network.hpp), on a directory laid out
// as /sys is, and on this machine's own /sys.
#include <catch2/catch.hpp>

#include <fstream>

#include "common/node_network.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;

namespace {

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text << "\n";
}

void interface(const fs::path& sys, const std::string& name, const std::string& state,
               const std::string& flags) {
  write(sys / "class/net" / name / "operstate", state);
  write(sys / "class/net" / name / "flags", flags);
}

}  // namespace

TEST_CASE(
    "the node's interfaces are those up and not loopback, its HCAs those with an active "
    "port",
    "[node_network]") {
  muster::test::temp_dir sys;
  interface(sys.path(), "lo", "unknown", "0x9");
  interface(sys.path(), "eth0", "up", "0x1003");
  interface(sys.path(), "ib0", "up", "0x1003");
  interface(sys.path(), "ifb0", "down", "0x82");
  interface(sys.path(), "odd", "up", "0x9");         // up, but a loopback
  interface(sys.path(), "docker0", "up", "0x1003");  // bridges to containers, not to nodes
  interface(sys.path(), "veth1a2b", "up", "0x1003");
  write(sys / "class/infiniband/mlx5_1/ports/1/state", "4: ACTIVE");
  write(sys / "class/infiniband/mlx5_0/ports/1/state", "1: DOWN");
  write(sys / "class/infiniband/mlx5_0/ports/2/state", "4: ACTIVE");
  write(sys / "class/infiniband/mlx5_2/ports/1/state", "1: DOWN");
  const auto n = muster::probe_node_network(sys.path());
  CHECK(n.interfaces == std::vector<std::string>{"eth0", "ib0"});
  CHECK(n.ib_hcas == std::vector<std::string>{"mlx5_0", "mlx5_1"});
}

TEST_CASE("a node without sysfs entries has no interfaces and no HCAs", "[node_network]") {
  muster::test::temp_dir sys;
  const auto n = muster::probe_node_network(sys.path());
  CHECK(n.interfaces.empty());
  CHECK(n.ib_hcas.empty());
}

TEST_CASE("this machine's /sys lists its interfaces that are up, never lo", "[node_network]") {
  const auto n = muster::probe_node_network();
  for (const auto& name : n.interfaces) {
    INFO(name);
    CHECK(name != "lo");
    std::ifstream state("/sys/class/net/" + name + "/operstate");
    std::string line;
    std::getline(state, line);
    CHECK(line == "up");
  }
}
