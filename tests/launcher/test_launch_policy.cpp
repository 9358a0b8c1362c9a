// launch_policy's choices for a job's ranks that need no daemon: the hang detection's limit.
#include <catch2/catch.hpp>

#include "common/job_config.hpp"
#include "launcher/launch_policy.hpp"

using namespace muster;
using muster::launcher::hang_timeout_s;

TEST_CASE(
    "muster-train's hang limit comes after its collective timeout, another program's is "
    "the job's",
    "[launch_policy]") {
  job_config c;  // launch.timeout_hang = comm.timeout = 600 s
  const std::vector<std::string> train = {"/usr/bin/muster-train"};
  const std::vector<std::string> python = {"python3", "train.py"};
  CHECK(hang_timeout_s(c, python) == 600);
  CHECK(hang_timeout_s(c, train) == 600 + launcher::kHangAfterCollective);
  c.comm.timeout = 30;
  CHECK(hang_timeout_s(c, train) == 600);  // already past it
  c.launch.timeout_hang = 20;
  CHECK(hang_timeout_s(c, train) == 30 + launcher::kHangAfterCollective);
  CHECK(hang_timeout_s(c, python) == 20);
  c.launch.timeout_hang = 0;  // off stays off
  CHECK(hang_timeout_s(c, train) == 0);
}
