// Tests of counting this machine's GPUs from its device nodes (launcher/local_gpus.hpp).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "launcher/local_gpus.hpp"
#include "tests/support/temp_dir.hpp"

TEST_CASE("only /dev/nvidiaN character devices count as GPUs", "[local_gpus]") {
  muster::test::temp_dir dev;
  muster::test::write_file(dev / "nvidia7", "a regular file is not a device");
  CHECK(muster::launcher::count_local_gpus(dev.path()) == 0);
  if (geteuid() != 0) {
    WARN("SKIPPED: creating character devices needs root");
    return;
  }
  for (const char* name : {"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia1x"})
    REQUIRE(mknod((dev / name).c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0);
  CHECK(muster::launcher::count_local_gpus(dev.path()) == 2);
}

TEST_CASE("a missing device directory has no GPUs", "[local_gpus]") {
  CHECK(muster::launcher::count_local_gpus("/nonexistent-dev") == 0);
}
