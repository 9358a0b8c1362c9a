// `muster plan` run as users run it: the real binary, its exit codes (0 fits, 3 does not fit,
// 2 invalid), its report, its JSON, and the world it reads from a real Slurm task environment
// (captured from Slurm 22.05, tests/launcher/slurm_env/).
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/subprocess.hpp"

namespace {

const std::string kMuster = std::string(MUSTER_BIN_DIR) + "/muster";
const std::string kSource = MUSTER_SOURCE_DIR;
const std::string kExample = kSource + "/etc/examples/job.toml";
const std::string kQwen3 = "model.config_json=" + kSource + "/etc/examples/hf-configs/qwen3-30b-a3b.json";

// Outside Slurm, whatever the environment ctest runs in.
muster::test::env_change no_slurm() {
  return {{}, {"SLURM_JOB_ID", "SLURM_JOBID", "SLURM_STEP_ID"}};
}

muster::test::process_result plan(std::vector<std::string> args,
                                  const muster::test::env_change& env = no_slurm()) {
  args.insert(args.begin(), {kMuster, "plan", kExample});
  auto r = muster::test::run_process(args, env);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  return r;
}

}  // namespace

TEST_CASE("muster plan exits 0 and reports layout, groups, batch and memory when it fits",
          "[plan_cli]") {
  auto r = plan({kQwen3, "train.seq_length=4096", "parallel.expert=8", "parallel.expert_tensor=1",
                 "--nodes", "2", "--gpus-per-node", "8", "--rank", "13"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("world           16 ranks (2 nodes x 8 per node)"));
  CHECK_THAT(r.out, Catch::Contains("expert mesh     etp 1  ep 8  edp 2  pp 1"));
  CHECK_THAT(r.out, Catch::Contains("rank 13 (node 1, local rank 5)"));
  CHECK_THAT(r.out, Catch::Contains("ep            [8, 9, 10, 11, 12, 13, 14, 15]"));
  CHECK_THAT(r.out, Catch::Contains("global batch    16 = micro 1 x accumulation 1 x dp 16"));
  CHECK_THAT(r.out, Catch::Contains("30.53 B parameters"));
  CHECK_THAT(r.out, Catch::Contains("verdict: fits"));
  CHECK_THAT(r.out, Catch::Contains("note: LLaMA-Factory's MCA note"));
}

TEST_CASE("muster plan exits 3 with ranked fixes when it does not fit", "[plan_cli]") {
  auto r = plan({kQwen3, "train.seq_length=4096", "parallel.expert=8", "parallel.expert_tensor=1",
                 "--world", "16", "--gpu-memory", "48GiB"});
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.out, Catch::Contains("verdict: does NOT fit"));
  CHECK_THAT(r.out, Catch::Contains("to make it fit, in the order the guides give:"));
  CHECK_THAT(r.out, Catch::Contains("1. activation recompute: train.recompute="));
}

TEST_CASE("muster plan lists the changes that make room when it fits with little to spare",
          "[plan_cli]") {
  // etc/examples/qwen3-30b-a3b.toml's layout (EP 8, ZeRO-3) on 16 GPUs of 40 GiB: 3.2% spare
  auto r = muster::test::run_process({kMuster, "plan", kSource + "/etc/examples/qwen3-30b-a3b.toml",
                                      "--nodes", "2", "--gpus-per-node", "8", "--gpu-memory",
                                      "40GiB", "train.recompute=full", "parallel.context=4"},
                                     no_slurm());
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("prefer a change from the list below"));
  CHECK_THAT(r.out,
             Catch::Contains("for more room to spare, in the order the guides give:\n  1. "));
  CHECK_THAT(r.out, Catch::Contains("% spare\n"));
}

TEST_CASE("muster plan exits 2 naming the input of an invalid plan", "[plan_cli]") {
  auto r = plan({kQwen3, "parallel.expert=3", "--world", "12"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK_THAT(r.err, Catch::StartsWith("muster: command line 'parallel.expert=3': parallel.expert: "
                                      "3 does not divide the 128 experts"));
  auto bad_size = plan({"--world", "4", "--gpu-memory", "80"});
  CHECK(bad_size.exit_code == 2);
  CHECK_THAT(bad_size.err, Catch::Contains("--gpu-memory: \"80\": give a unit"));
  auto both = plan({"--world", "4", "--nodes", "2", "--gpus-per-node", "2"});
  CHECK(both.exit_code == 2);
  CHECK_THAT(both.err, Catch::Contains("give --world N or --nodes N --gpus-per-node G, not both"));
  auto rank = plan({"--world", "4", "--rank", "4"});
  CHECK(rank.exit_code == 2);
  CHECK_THAT(rank.err, Catch::Contains("--rank 4 is outside the 4 ranks"));
}

TEST_CASE("muster plan --json holds every rank, group and stage", "[plan_cli]") {
  auto r = plan({kQwen3, "train.seq_length=4096", "--json", "--world", "16",
                 "parallel.allocation=megatron:(attn:d1p4t2c2|ffn:d1p4t1e4)",
                 "parallel.sequence_parallel=true", "train.grad_accum_steps=8"});
  REQUIRE((r.exit_code == 0 || r.exit_code == 3));
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["valid"] == true);
  CHECK(j["fits"] == (r.exit_code == 0));
  CHECK(j["layout"]["tp"] == 2);
  CHECK(j["layout"]["cp"] == 2);
  CHECK(j["layout"]["pp"] == 4);
  CHECK(j["layout"]["ep"] == 4);
  CHECK(j["layout"]["edp"] == 1);
  CHECK(j["ranks"].size() == 16);
  CHECK(j["groups"]["tp"].size() == 8);
  CHECK(j["groups"]["pp"][0] == nlohmann::json({0, 4, 8, 12}));
  CHECK(j["memory"]["stages"].size() == 4);
  CHECK(j["compare"]["sharding"].size() == 4);
  CHECK(j["compare"]["recompute"][2]["setting"] == "train.recompute=full");
  CHECK(j["batch"]["global_batch_size"] == 8);
  CHECK(j["model"]["params_total"] == 30532122624LL);
  int rank5_tp = j["ranks"][5]["group_index"]["tp"];
  CHECK(j["groups"]["tp"][rank5_tp].dump() == "[4,5]");

  auto invalid = plan({"--json", "--world", "3", "parallel.tensor=2"});
  CHECK(invalid.exit_code == 2);
  auto e = nlohmann::json::parse(invalid.out);
  CHECK(e["valid"] == false);
  CHECK_THAT(e["error"].get<std::string>(), Catch::Contains("not divisible by tensor"));
  // and beside the world's rule, the model's: a MoE model under tensor parallelism wants
  // sequence parallelism
  REQUIRE(e["problems"].size() == 2);
  CHECK_THAT(e["problems"][1].get<std::string>(), Catch::Contains("needs sequence parallelism"));
  auto many = plan({"--json", "--world", "8", "parallel.pipeline=2", "model.num_layers=5",
                    "model.num_experts=6", "parallel.expert=4", "parallel.expert_tensor=1"});
  auto m = nlohmann::json::parse(many.out);
  CHECK(m["problems"].size() == 2);
  CHECK(m["compare"].is_null());
  // a job file's own mistake (an unknown key) is JSON too
  auto unknown = plan({"--json", "--world", "8", "train.micro_batch=2"});
  CHECK(unknown.exit_code == 2);
  auto u = nlohmann::json::parse(unknown.out);
  CHECK(u["valid"] == false);
  CHECK_THAT(u["error"].get<std::string>(), Catch::Contains("train.micro_batch"));
}

TEST_CASE("inside a Slurm task, muster plan takes the world from the job's nodes and GPUs",
          "[plan_cli]") {
  muster::test::env_change env;
  std::ifstream in(kSource + "/tests/launcher/slurm_env/srun-N2-gres-gpu4.task0.env");
  for (std::string line; std::getline(in, line);) {
    auto eq = line.find('=');
    if (eq != std::string::npos && line.rfind("SLURM", 0) == 0)
      env.set[line.substr(0, eq)] = line.substr(eq + 1);
  }
  REQUIRE(env.set.count("SLURM_JOB_ID") == 1);
  auto r = plan({}, env);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("8 ranks (Slurm job 4: 2 nodes x 4 per node) on 2 nodes x "
                                    "4 GPUs (the Slurm job)"));
}

TEST_CASE("outside Slurm and without flags, muster plan plans this machine", "[plan_cli]") {
  auto r = plan({});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("(this machine: "));
  auto sized = plan({"parallel.allocation=d4t2", "parallel.sequence_parallel=true"});
  CHECK_THAT(sized.out, Catch::Contains("world           8 ranks (the product of the parallel sizes)"));
  // launch.nproc sets the GPUs a node: this machine's count does not
  auto nproc = plan({"launch.nproc=4"});
  CHECK_THAT(nproc.out, Catch::Contains("4 ranks (launch.nproc = 4 on one node; pass --world or "
                                        "--nodes) on 1 node x 4 GPUs (launch.nproc)"));
}

TEST_CASE("muster config says grad_accum_steps is derived where global_batch_size is set",
          "[plan_cli]") {
  const auto config = [](std::vector<std::string> args) {
    args.insert(args.begin(), {kMuster, "config", kExample});
    auto r = muster::test::run_process(args, no_slurm());
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code == 0);
    return r.out;
  };
  const std::string note = "# derived from global_batch_size on the job's world (muster plan";
  CHECK_THAT(config({"train.global_batch_size=64"}),
             Catch::Contains("\ngrad_accum_steps = 1  " + note));
  CHECK_THAT(config({"train.global_batch_size=64", "--docs"}),
             Catch::Contains("\ngrad_accum_steps = 1  " + note));
  CHECK_THAT(config({"train.global_batch_size=0"}), !Catch::Contains(note));
}

TEST_CASE("muster config --get prints a key's value alone, --origin where it came from",
          "[plan_cli]") {
  const auto config = [](std::vector<std::string> args) {
    args.insert(args.begin(), {kMuster, "config", kExample});
    return muster::test::run_process(args, no_slurm());
  };
  auto r = config({"--get", "train.steps", "--get", "job.name", "job.name=pretrain"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Matches("[0-9]+\npretrain\n"));  // a string bare, for scripts
  // several keys in one option, as a list
  CHECK(config({"--get", "train.steps,job.name", "job.name=pretrain"}).out == r.out);
  CHECK(config({"--get", "train.steps, job.name", "job.name=pretrain"}).out == r.out);
  r = config({"--get", "job.name", "--origin", "job.name=x"});
  CHECK(r.out == "x  # command line 'job.name=x'\n");
  r = config({"--get", "trian.steps"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK_THAT(r.err, Catch::Contains("config --get: unknown key 'trian.steps'; did you mean "
                                    "'train.steps'?"));
  // the accumulation a global batch derives is said not to be the one printed
  r = config({"--get", "train.grad_accum_steps", "train.global_batch_size=64"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("train.grad_accum_steps is derived from global_batch_size"));
  // MUSTER_RUNS_DIR: launch.runs_dir where neither the file nor the command line sets it
  auto runs_env = no_slurm();
  runs_env.set["MUSTER_RUNS_DIR"] = "/scratch/me/runs";
  const auto get_runs = [&](std::vector<std::string> more) {
    // (job.toml sets every key; tiny-moe.toml no launch.runs_dir)
    std::vector<std::string> args = {
        kMuster, "config",          kSource + "/etc/examples/tiny-moe.toml",
        "--get", "launch.runs_dir", "--origin"};
    args.insert(args.end(), more.begin(), more.end());
    return muster::test::run_process(args, runs_env).out;
  };
  CHECK(get_runs({}) ==
        "/scratch/me/runs  # MUSTER_RUNS_DIR=/scratch/me/runs in the environment\n");
  CHECK(get_runs({"launch.runs_dir=/elsewhere"}) ==
        "/elsewhere  # command line 'launch.runs_dir=/elsewhere'\n");
  // MUSTER_LOG_LEVEL wins over log.level, and says so
  auto debug_env = no_slurm();
  debug_env.set["MUSTER_LOG_LEVEL"] = "debug";
  CHECK(muster::test::run_process({kMuster, "config", kExample, "--get", "log.level", "--origin"},
                                  debug_env)
            .out == "debug  # MUSTER_LOG_LEVEL=debug in the environment, which wins\n");
  r = config({"--origin", "train.steps=9"});
  CHECK_THAT(r.out, Catch::Contains("\nname = \"muster-job\"  # " + kExample + ":") &&
                        Catch::Contains("\nsteps = 9  # command line 'train.steps=9'\n"));
}
