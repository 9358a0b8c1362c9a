// `muster run` starting the built-in engine, muster-train, as its worker: the engine reads the
// job the launcher wrote to the run directory, trains, and reports each step through its
// heartbeat; a job the engine cannot run yet fails with its own message, which the launcher
// reports back from the error file.
#include <catch2/catch.hpp>

#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;

namespace {

const std::string kMuster = std::string(MUSTER_BIN_DIR) + "/muster";
const std::string kTrain = std::string(MUSTER_BIN_DIR) + "/muster-train";

const char* kTinyJob = R"([model]
num_layers = 2
hidden_size = 32
ffn_hidden_size = 64
num_attention_heads = 4
num_query_groups = 2
num_experts = 4
moe_ffn_hidden_size = 32
moe_router_topk = 2
[train]
micro_batch_size = 2
seq_length = 64
max_tokens_per_pack = 64
steps = 5
precision = "fp32"
)";

fs::path only_dir(const fs::path& runs) {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(runs))
    if (e.is_directory()) dirs.push_back(e.path());
  REQUIRE(dirs.size() == 1);
  return dirs.front();
}

}  // namespace

TEST_CASE("muster run trains with muster-train and sees its progress", "[train_run]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "tiny.toml", kTinyJob);
  auto r = muster::test::run_process({kMuster, "run", (dir / "tiny.toml").string(),
                                      "launch.runs_dir=" + (dir / "runs").string(),
                                      "launch.nproc=1", "--", kTrain});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[rank 0] ") && Catch::Contains("step 5/5 | loss "));
  const auto run = only_dir(dir / "runs");
  CHECK_THAT(muster::test::read_file(run / "logs" / "rank-0.heartbeat"),
             Catch::StartsWith("step=5 steps=5 loss="));
}

TEST_CASE("a job muster-train cannot run yet fails with its reason, reported by the launcher",
          "[train_run]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "tiny.toml", kTinyJob);
  auto r = muster::test::run_process({kMuster, "run", (dir / "tiny.toml").string(),
                                      "launch.runs_dir=" + (dir / "runs").string(),
                                      "launch.nproc=2", "launch.tee=none", "--", kTrain});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("muster-train runs one rank for now (WORLD_SIZE is 2)"));
}
