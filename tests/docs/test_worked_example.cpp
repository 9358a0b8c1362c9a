// docs/coming-from.md's worked example (Qwen3-30B-A3B on 2 nodes of 8 H100) against the planner:
// its job file, with the config.json of etc/examples/hf-configs beside it, plans to the memory
// the page's commands quote, so a change to the estimate cannot leave the page behind.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "common/byte_size.hpp"
#include "common/job_config.hpp"
#include "launcher/plan/job_plan.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kSource = MUSTER_SOURCE_DIR;

// The first ```toml block after the "## Worked example" heading.
std::string example_job(const std::string& page) {
  const auto section = page.find("## Worked example");
  REQUIRE(section != std::string::npos);
  const auto open = page.find("```toml\n", section);
  REQUIRE(open != std::string::npos);
  const auto close = page.find("```", open + 8);
  REQUIRE(close != std::string::npos);
  return page.substr(open + 8, close - open - 8);
}

// The worst stage's total of the job on `nodes` nodes of 8 GPUs, as muster plan prints it.
std::string planned(const fs::path& job, int nodes, std::vector<std::string> overrides = {}) {
  const auto loaded = muster::load_job_config(job, overrides);
  muster::launcher::plan::plan_request request;
  request.world = muster::launcher::plan::world_size{nodes * 8, "the page's command"};
  request.gpus_per_node = 8;
  return muster::format_bytes(
      muster::launcher::plan::make_plan(loaded.config, loaded.where, request).memory.total_bytes());
}

}  // namespace

TEST_CASE("coming-from.md's worked example quotes the memory muster plan estimates", "[docs]") {
  const auto page = muster::test::read_file(kSource / "docs/coming-from.md");
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "job.toml", example_job(page));
  fs::create_directories(dir / "Qwen3-30B-A3B");
  fs::copy_file(kSource / "etc/examples/hf-configs/qwen3-30b-a3b.json",
                dir / "Qwen3-30B-A3B/config.json");
  const auto two_nodes = planned(dir / "job.toml", 2);
  CHECK_THAT(page, Catch::Contains("--gpus-per-node 8        # exit 0: fits, " + two_nodes +
                                   " of 80 per GPU"));
  const auto one_node = planned(dir / "job.toml", 1);
  const auto full = planned(dir / "job.toml", 1, {"train.recompute=full"});
  CHECK_THAT(page, Catch::Contains("# exit 3: " + one_node + "; first fix: train.recompute=full (" +
                                   full + ")"));
}
