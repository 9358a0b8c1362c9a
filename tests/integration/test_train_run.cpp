// `muster run` starting the built-in engine, muster-train, as its worker: the engine reads the
// job the launcher wrote to the run directory, trains, and reports each step through its
// heartbeat; two data-parallel ranks train exactly as one rank reading their rows; a job the
// engine cannot run yet fails with its own message, which the launcher reports back.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/run_reader.hpp"
#include "tests/support/launch_output.hpp"
#include "tests/support/profile_text.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_job.hpp"

namespace fs = std::filesystem;

namespace {

const std::string kMuster = std::string(MUSTER_BIN_DIR) + "/muster";
const std::string kTrain = std::string(MUSTER_BIN_DIR) + "/muster-train";

const std::string kTinyJob = muster::test::tiny_job(5);

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
  const auto run = muster::test::only_run_dir(dir / "runs");
  CHECK_THAT(muster::test::read_file(run / "logs" / "rank-0.heartbeat"),
             Catch::StartsWith("step=5 steps=5 loss="));
  // 5 steps under the default 10 of warmup: said
  CHECK_THAT(muster::test::read_file(run / "logs" / "rank-0.log"),
             Catch::Contains("train.warmup_steps = 10 is above train.steps = 5") &&
                 Catch::Contains("a step: global batch 2 = micro-batch 2 x accumulation 1 x "
                                 "data-parallel 1\n") &&
                 Catch::Contains(" rows of 64 tokens an epoch; 5 steps of 2 rows read "));
  // the last step saved (checkpoint.interval = 0); -1 saves nothing unless signalled
  CHECK(fs::exists(run / "checkpoints" / "step-00000005" / "trainer_state.json"));
  // a requeued job's slurm.out keeps an earlier start's stop: the run that then succeeded is
  // neither "stopped as asked" nor one to resume
  muster::test::write_file(dir / "slurm.out",
                           "muster: the ranks stopped on the SIGUSR1 passed on to them, as asked "
                           "(...); logs in /runs/x/logs\n");
  const auto diagnosed = muster::test::run_process(
      {kMuster, "diagnose", run.string(), "--log", (dir / "slurm.out").string()});
  INFO(diagnosed.out);
  CHECK(diagnosed.exit_code == 0);
  CHECK_THAT(diagnosed.out, Catch::StartsWith("no failure found in ") &&
                                Catch::Contains(" lines; the run succeeded\n") &&
                                !Catch::Contains("stopped as asked") &&
                                !Catch::Contains("resume:"));
  const auto unsaved = muster::test::run_process(
      {kMuster, "run", (dir / "tiny.toml").string(),
       "launch.runs_dir=" + (dir / "unsaved").string(), "launch.nproc=1", "train.steps=1",
       "checkpoint.interval=-1", "train.peak_tflops=0.00001", "--", kTrain});
  CHECK(unsaved.exit_code == 0);
  // a peak below what the rank does: MFU above 100%, said once
  CHECK_THAT(
      muster::test::read_file(muster::test::only_run_dir(dir / "unsaved") / "logs" / "rank-0.log"),
      Catch::Contains("is above 100%: the peak it is taken of, 1e-05 TFLOP/s "
                      "(train.peak_tflops), is below what this rank does; set "
                      "train.peak_tflops to the hardware's peak"));
  CHECK_FALSE(fs::exists(muster::test::only_run_dir(dir / "unsaved") / "checkpoints"));
  // by hand (one rank), a global batch the micro-batch does not divide is refused
  const auto hand = muster::test::run_process(
      {kTrain, (dir / "tiny.toml").string(), "train.global_batch_size=3"});
  CHECK(hand.exit_code == 2);
  CHECK_THAT(hand.err, Catch::Contains("command line 'train.global_batch_size=3': "
                                       "train.global_batch_size: 3 is not a multiple of "
                                       "micro_batch_size x data parallel = 2 x 1 = 2; use "
                                       "global_batch_size = 2 or 4"));
  // every step reached the run store through the launcher
  const auto steps = muster::store::run_reader(run).steps();
  REQUIRE(steps.size() == 5);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    CHECK(steps[i].rank == 0);
    CHECK(steps[i].step == static_cast<std::int64_t>(i));
    CHECK(steps[i].tokens == 2 * 64);
    CHECK(steps[i].loss > 0);
    CHECK(steps[i].mem_bytes > 1 << 20);
    // the engine's own metrics, beside the loss
    CHECK(steps[i].aux_loss > 0);
    CHECK(steps[i].z_loss == 0);  // model.moe_z_loss_coeff is 0
    CHECK(steps[i].grad_norm > 0);
    CHECK(steps[i].tokens_per_s > 0);
    CHECK(steps[i].mfu > 0);
    CHECK(steps[i].mfu < 1);
    CHECK(steps[i].peak_mem_bytes >= steps[i].mem_bytes);
    CHECK(steps[i].mem_device == "cpu");  // the process's resident memory
    CHECK(steps[i].comm_wait_s == 0);     // one rank waits for nobody
  }
  CHECK(steps[4].lr > 0);

  // muster status: the runs of the directory, the run, and all of it as JSON
  const auto id = run.filename().string();
  const auto list =
      muster::test::run_process({kMuster, "status", "--runs-dir", (dir / "runs").string()});
  REQUIRE(list.exit_code == 0);
  CHECK_THAT(list.out, Catch::Contains(id) && Catch::Contains("succeeded"));
  const auto text = muster::test::run_process(
      {kMuster, "status", "--runs-dir", (dir / "runs").string(), id.substr(0, 12)});
  INFO("status: " << text.out << text.err);
  REQUIRE(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains("step 5 of 5 | loss ") && Catch::Contains("MFU ") &&
                           Catch::Contains("tp 1 cp 1 dp 1 pp 1 | etp 1 ep 1 edp 1"));
  // MUSTER_RUNS_DIR stands for --runs-dir in status, diagnose and report (runs kept under
  // another launch.runs_dir than ./muster-runs)
  const muster::test::env_change runs_env{{{"MUSTER_RUNS_DIR", (dir / "runs").string()}}, {}};
  const auto by_env = muster::test::run_process({kMuster, "status", id.substr(0, 12)}, runs_env);
  INFO("status by MUSTER_RUNS_DIR: " << by_env.out << by_env.err);
  CHECK(by_env.exit_code == 0);
  CHECK_THAT(by_env.out, Catch::Contains("step 5 of 5 | loss "));
  // diagnose compares the ranks' resident memory with the plan of muster-train's layout
  // without a GPU's 2 GiB reserve
  const auto diagnosis = muster::test::run_process({kMuster, "diagnose", id}, runs_env);
  INFO("diagnose: " << diagnosis.out << diagnosis.err);
  CHECK(diagnosis.exit_code == 0);
  CHECK_THAT(diagnosis.out, Catch::Contains("(resident memory, on the CPU); the planner estimated "
                                            "") &&
                                Catch::Contains("MiB of a rank's tensors (resident memory "
                                                "also holds the program"));
  CHECK(muster::test::run_process({kMuster, "status", id}, {{}, {"MUSTER_RUNS_DIR"}}).exit_code ==
        2);  // not in ./muster-runs
  // --watch is a flag (=SECONDS sets its period): the run after it is the run, and an ended
  // run is shown once; a pipe gets no terminal escapes
  for (const auto* watch : {"--watch", "--watch=1", "--watch=0.5"}) {
    const auto watched = muster::test::run_process(
        {kMuster, "status", "--runs-dir", (dir / "runs").string(), watch, id.substr(0, 12)});
    INFO(watch << ": " << watched.out << watched.err);
    CHECK(watched.exit_code == 0);
    CHECK_THAT(watched.out, Catch::Contains("step 5 of 5 | loss "));
    CHECK(watched.out.find('\x1b') == std::string::npos);
  }
  for (const auto* bad : {"--watch=0", "--watch=soon", "--watch=-1"}) {
    const auto refused = muster::test::run_process(
        {kMuster, "status", "--runs-dir", (dir / "runs").string(), bad, id});
    INFO(bad << ": " << refused.out << refused.err);
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.err, Catch::Contains("not a number of seconds"));
  }
  const auto json = muster::test::run_process({kMuster, "status", run.string(), "--json"});
  REQUIRE(json.exit_code == 0);
  const auto status = nlohmann::json::parse(json.out);
  CHECK(status["run"]["state"] == "succeeded");
  CHECK(status["steps_done"] == 5);
  CHECK(status["history"].size() == 5);
  CHECK(status["history"][4]["step"] == 5);
  CHECK(status["ranks"][0]["state"] == "succeeded");
  CHECK(status["ranks"][0]["laggard"] == false);
  const auto missing = muster::test::run_process(
      {kMuster, "status", "--runs-dir", (dir / "runs").string(), "no-such-run"});
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("no run directory, run id or Slurm job id"));
}

TEST_CASE(
    "relative checkpoint paths are from where muster ran: diagnose finds the checkpoints from "
    "elsewhere",
    "[train_run]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "tiny.toml", muster::test::tiny_job(2));
  const auto here = fs::current_path();
  fs::current_path(dir.path());  // the launcher, and so its ranks, start in dir
  const auto r = muster::test::run_process({kMuster, "run", "tiny.toml", "launch.runs_dir=runs",
                                            "launch.nproc=1", "checkpoint.dir=ckpt",
                                            "checkpoint.interval=1", "--", kTrain});
  fs::current_path(here);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  const auto run = muster::test::only_run_dir(dir / "runs");
  const auto saved = fs::canonical(dir.path()) / "ckpt" / "step-00000002";
  CHECK(fs::exists(saved / "trainer_state.json"));
  // the run's copy of the job names the folder, so diagnose finds it from any directory
  CHECK_THAT(muster::test::read_file(run / "job.toml"),
             Catch::Contains("dir = \"" + (fs::canonical(dir.path()) / "ckpt").string() + "\""));
  const auto d = muster::test::run_process({kMuster, "diagnose", "--json", run.string()});
  INFO("diagnose: " << d.out << d.err);
  CHECK(nlohmann::json::parse(d.out).value("newest_checkpoint", "") == saved.string());
}

TEST_CASE(
    "a job muster-train cannot run fails with its reason: the launcher's before any rank "
    "starts, a rank's in the run store",
    "[train_run]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "tiny.toml", kTinyJob);
  // what muster-train cannot run yet, the launcher refuses before it makes a run directory
  auto r = muster::test::run_process(
      {kMuster, "run", (dir / "tiny.toml").string(), "launch.runs_dir=" + (dir / "runs").string(),
       "launch.nproc=2", "launch.tee=none", "parallel.pipeline=2", "--", kTrain});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("muster-train runs data and expert parallel only for now: "
                                    "parallel.tensor, pipeline and context must be 1 (found 1, 2, "
                                    "1); set them to 1, or run a program of your own after --"));
  CHECK_FALSE(std::filesystem::exists(dir / "runs"));
  // the same without a program after -- (muster-train is the default)
  r = muster::test::run_process({kMuster, "run", (dir / "tiny.toml").string(),
                                 "launch.runs_dir=" + (dir / "runs").string(), "launch.nproc=2",
                                 "parallel.tensor=2", "parallel.sequence_parallel=true"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("muster-train runs data and expert parallel only"));
  CHECK_FALSE(std::filesystem::exists(dir / "runs"));

  // data that does not open, too, with the path
  const auto missing = (dir / "no-such-text").string();
  r = muster::test::run_process(
      {kMuster, "run", (dir / "tiny.toml").string(), "launch.runs_dir=" + (dir / "runs").string(),
       "launch.nproc=2", "launch.tee=none", "data.paths=[\"" + missing + "\"]", "--", kTrain});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("data.paths: " + missing + " does not exist"));
  CHECK_FALSE(std::filesystem::exists(dir / "runs"));
  // and data whose token ids the model has no rows for
  r = muster::test::run_process({kMuster, "run", (dir / "tiny.toml").string(),
                                 "launch.runs_dir=" + (dir / "runs").string(), "launch.nproc=2",
                                 "model.vocab_size=200", "--", kTrain});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("holds token ids up to 255 but model.vocab_size is 200"));
  CHECK_FALSE(std::filesystem::exists(dir / "runs"));
  // a checkpoint folder that cannot be made: said now, not at the first save
  muster::test::write_file(dir / "a-file", "");
  r = muster::test::run_process(
      {kMuster, "run", (dir / "tiny.toml").string(), "launch.runs_dir=" + (dir / "runs").string(),
       "launch.nproc=1", "checkpoint.dir=" + (dir / "a-file" / "ckpt").string(), "--", kTrain});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("checkpoint.dir = " + (dir / "a-file" / "ckpt").string() +
                                    ": " + (dir / "a-file").string() + " is not a directory"));
  CHECK_FALSE(std::filesystem::exists(dir / "runs"));
  r = muster::test::run_process({kMuster, "run", (dir / "tiny.toml").string(),
                                 "launch.runs_dir=" + (dir / "runs").string(), "launch.nproc=1",
                                 "checkpoint.dir=/proc/muster-ckpt", "--", kTrain});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("checkpoint.dir = /proc/muster-ckpt: /proc (where it would "
                                    "be made) is on a file system that stores nothing"));

  // what only a rank finds (no GPU it can see, for train.device = "cuda") is in the run store,
  // with the phase the ranks failed in (the first to fail has the launcher stop the other,
  // which may not have written its own yet on a busy machine)
  r = muster::test::run_process(
      {kMuster, "run", (dir / "tiny.toml").string(), "launch.runs_dir=" + (dir / "runs").string(),
       "launch.nproc=2", "launch.tee=none", "train.device=cuda", "--", kTrain},
      muster::test::env_change{{{"CUDA_VISIBLE_DEVICES", ""}}, {}});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("train.device = \"cuda\" but"));
  const auto errors = muster::store::run_reader(muster::test::only_run_dir(dir / "runs")).errors();
  REQUIRE_FALSE(errors.empty());
  CHECK(errors.size() <= 2);
  for (const auto& e : errors) {
    CHECK(e.phase == "startup");
    CHECK(e.kind == "bad_input");
    CHECK_FALSE(e.step);
    CHECK_THAT(e.message, Catch::Contains("train.device = \"cuda\" but"));
  }
  // diagnose says to change the input, not to read a traceback the engine has none of
  const auto diagnosis = muster::test::run_process(
      {kMuster, "diagnose", muster::test::only_run_dir(dir / "runs").string()});
  INFO("diagnose: " << diagnosis.out << diagnosis.err);
  CHECK_THAT(diagnosis.out, Catch::Contains("train.device = \"cuda\" but") &&
                                Catch::Contains("the error above names the input to change") &&
                                !Catch::Contains("traceback"));
}

TEST_CASE("a rank that fails loading its checkpoint records the phase and step in the run store",
          "[train_run]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "tiny.toml", kTinyJob);
  // a checkpoint.load that is not there is the launcher's to refuse
  auto r = muster::test::run_process(
      {kMuster, "run", (dir / "tiny.toml").string(), "launch.runs_dir=" + (dir / "runs").string(),
       "launch.nproc=1", "launch.tee=none", "checkpoint.load=" + (dir / "no-such-step").string(),
       "--", kTrain});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("checkpoint.load = " + (dir / "no-such-step").string() +
                                    ": does not exist; name a checkpoint directory"));
  CHECK_FALSE(std::filesystem::exists(dir / "runs"));
  // nor one that holds no checkpoint; a step directory misnamed is said with the one there is
  std::filesystem::create_directories(dir / "empty-step");
  std::filesystem::create_directories(dir / "step-00000004");
  muster::test::write_file(dir / "step-00000004" / "trainer_state.json", "{}");
  r = muster::test::run_process({kMuster, "run", (dir / "tiny.toml").string(),
                                 "launch.runs_dir=" + (dir / "runs").string(), "launch.nproc=1",
                                 "launch.tee=none",
                                 "checkpoint.load=" + (dir / "empty-step").string(), "--", kTrain});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("empty-step: holds neither model.safetensors (or its "
                                    ".index.json) nor a complete step-N directory"));
  r = muster::test::run_process({kMuster, "run", (dir / "tiny.toml").string(),
                                 "launch.runs_dir=" + (dir / "runs").string(), "launch.nproc=1",
                                 "launch.tee=none", "checkpoint.load=" + (dir / "step-4").string(),
                                 "--", kTrain});
  CHECK_THAT(r.err, Catch::Contains("step-4: does not exist (the newest checkpoint there is " +
                                    (dir / "step-00000004").string() + ")"));
  CHECK_FALSE(std::filesystem::exists(dir / "runs"));
  // the job's own checkpoint.dir before its first save (Megatron's --load of its --save
  // folder): a first run, from step 1
  r = muster::test::run_process({kMuster, "run", (dir / "tiny.toml").string(),
                                 "launch.runs_dir=" + (dir / "first").string(), "launch.nproc=1",
                                 "launch.tee=none", "checkpoint.dir=" + (dir / "own").string(),
                                 "checkpoint.load=" + (dir / "own").string(), "--", kTrain});
  CHECK(r.exit_code == 0);
  CHECK_THAT(
      muster::test::read_file(muster::test::only_run_dir(dir / "first") / "logs" / "rank-0.log"),
      Catch::Contains("(checkpoint.dir) holds no checkpoint yet: training from step 1"));
  // one whose weights cannot be read: the rank's to find
  muster::test::write_file(dir / "empty-step" / "model.safetensors", "not a safetensors file");
  r = muster::test::run_process({kMuster, "run", (dir / "tiny.toml").string(),
                                 "launch.runs_dir=" + (dir / "runs").string(), "launch.nproc=1",
                                 "launch.tee=none",
                                 "checkpoint.load=" + (dir / "empty-step").string(), "--", kTrain});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("(in checkpoint)"));  // loading: of no step of this run
  const auto errors = muster::store::run_reader(muster::test::only_run_dir(dir / "runs")).errors();
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].rank == 0);
  CHECK(errors[0].phase == "checkpoint");
  CHECK_FALSE(errors[0].step);
  CHECK_THAT(errors[0].message, Catch::Contains("empty-step"));
}

TEST_CASE(
    "a rank out of memory records an oom error saying what to change, without a C++ "
    "backtrace",
    "[train_run]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "tiny.toml", kTinyJob);
  // one dense layer whose MLP alone is 128 GB: more than this machine holds or will promise
  auto r = muster::test::run_process(
      {kMuster, "run", (dir / "tiny.toml").string(), "launch.runs_dir=" + (dir / "runs").string(),
       "launch.nproc=1", "launch.tee=none", "model.num_layers=1", "model.num_experts=0",
       "model.hidden_size=8192", "model.num_attention_heads=64", "model.num_query_groups=8",
       "model.ffn_hidden_size=4000000", "parallel.sharding=optim_grads_params",
       "train.recompute=full", "--", kTrain});
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 1);
  const auto errors = muster::store::run_reader(muster::test::only_run_dir(dir / "runs")).errors();
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].kind == "oom");
  CHECK(errors[0].phase == "startup");
  CHECK_THAT(errors[0].message, Catch::Contains("can't allocate memory") &&
                                    Catch::Contains("muster plan JOB.toml") &&
                                    !Catch::Contains("frame #"));
  // before any step only the weights and optimizer state are held: what it proposes leaves out
  // the batch and recompute, which do not matter yet, and what the job does already (ZeRO-3)
  CHECK_THAT(errors[0].message,
             Catch::EndsWith("shows what each rank holds; before any step, so the parameters and "
                             "optimizer state alone do not fit (no batch yet): add nodes (the "
                             "ranks of a node share its host memory) or train a smaller model"));
  // in a step, rows of 2M tokens: the batch and recompute are what to change
  auto in_step = muster::test::run_process(
      {kMuster, "run", (dir / "tiny.toml").string(), "launch.runs_dir=" + (dir / "runs2").string(),
       "launch.nproc=1", "launch.tee=none", "train.seq_length=2000000",
       "train.max_tokens_per_pack=0", "train.recompute=none", "--", kTrain});
  CHECK(in_step.exit_code == 1);
  const auto step_errors =
      muster::store::run_reader(muster::test::only_run_dir(dir / "runs2")).errors();
  REQUIRE(step_errors.size() == 1);
  CHECK(step_errors[0].kind == "oom");
  CHECK(step_errors[0].phase == "forward");
  CHECK_THAT(step_errors[0].message,
             Catch::EndsWith("shows what each rank holds; add ranks, lower train.micro_batch_size "
                             "(now 2) or set train.recompute = \"selective\" (or \"full\")"));
}

// The loss of every step rank 0 logged ("step 3/20 | loss 4.123456 | ...").
std::vector<double> logged_losses(const fs::path& runs) {
  std::vector<double> losses;
  std::istringstream log(
      muster::test::read_file(muster::test::only_run_dir(runs) / "logs" / "rank-0.log"));
  for (std::string line; std::getline(log, line);)
    if (auto at = line.find("| loss "); at != std::string::npos)
      losses.push_back(std::stod(line.substr(at + 7)));
  return losses;
}

// Trains the tiny job (written as dir/tiny.toml) for 20 steps on `nproc` ranks reading the
// same 4 rows a step (1 rank x 4, 2 ranks x 2 or 4 ranks x 1), the router losses on, with
// `extra` overrides; rank 0's losses.
std::vector<double> train_tiny(const fs::path& dir, int nproc, const std::string& sharding,
                               int expert, const std::vector<std::string>& extra = {}) {
  const auto runs =
      dir / fmt::format("{}-{}-ep{}-{}", nproc, sharding, expert, fmt::join(extra, ","));
  std::vector<std::string> argv{kMuster,
                                "run",
                                (dir / "tiny.toml").string(),
                                "launch.runs_dir=" + runs.string(),
                                "launch.nproc=" + std::to_string(nproc),
                                "launch.tee=none",
                                "parallel.sharding=" + sharding,
                                "parallel.expert=" + std::to_string(expert),
                                "train.steps=20",
                                "train.lr=3e-3",
                                "train.micro_batch_size=" + std::to_string(4 / nproc),
                                "model.moe_aux_loss_coeff=0.01",
                                "model.moe_z_loss_coeff=0.001"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.end(), {"--", kTrain});
  auto r = muster::test::run_process(argv, {{{"OMP_NUM_THREADS", "1"}}, {}});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return logged_losses(runs);
}

TEST_CASE(
    "data- and expert-parallel ranks give the losses of 1 rank reading the same rows, "
    "under every sharding strategy and recompute mode",
    "[train_run]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "tiny.toml", kTinyJob);
  const auto run = [&](int nproc, const std::string& sharding, int expert,
                       const std::vector<std::string>& extra = {}) {
    return train_tiny(dir.path(), nproc, sharding, expert, extra);
  };
  const auto one = run(1, "no_shard", 1);
  REQUIRE(one.size() == 20);
  CHECK(one.back() < one.front() - 1.0);
  struct layout {
    int nproc, expert;
    std::string sharding;
    std::vector<std::string> extra = {};
  };
  const std::vector<layout> layouts{
      {2, 1, "no_shard"},
      {2, 1, "optim"},
      {2, 1, "optim", {"parallel.overlap_grad_reduce=false"}},
      {2, 1, "optim_grads"},
      {2, 1, "optim_grads", {"parallel.overlap_grad_reduce=false"}},
      {2, 1, "optim_grads_params"},
      {2, 2, "optim_grads_params"},
      {2, 2, "no_shard"},
      {4, 2, "optim_grads_params"},  // EP 2 x expert-data-parallel 2: experts sharded too
      // each layer gathered only when used, its gradients reduced as its backward ends
      {4,
       2,
       "optim_grads_params",
       {"parallel.fsdp_prefetch=false", "parallel.overlap_grad_reduce=false"}},
      // recompute: layers run again in backward, inside their gather, all-to-all included
      {1, 1, "no_shard", {"train.recompute=selective"}},
      {1, 1, "no_shard", {"train.recompute=full"}},
      {2, 2, "optim_grads_params", {"train.recompute=full"}},
      {2, 2, "optim_grads_params", {"train.recompute=selective", "parallel.fsdp_prefetch=false"}},
  };
  for (const auto& l : layouts) {
    const auto other = run(l.nproc, l.sharding, l.expert, l.extra);
    REQUIRE(other.size() == 20);
    for (std::size_t i = 0; i < one.size(); ++i) {
      INFO(l.nproc << " ranks, EP " << l.expert << ", " << l.sharding << ", "
                   << fmt::format("{}", fmt::join(l.extra, " ")) << ", step " << i + 1);
      CHECK(other[i] == Approx(one[i]).epsilon(1e-5));
    }
  }
}

// Two micro-batches a step: optim_grads_params finishes each unit's reduction left running from
// the first before the second's backward adds to the same shard, and optim starts a unit's only
// after the last; the same sums as waiting for each.
TEST_CASE(
    "overlapped gradient reductions over two micro-batches sum what waiting for each sums, and "
    "train.global_batch_size derives them",
    "[train_run]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "tiny.toml", kTinyJob);
  const std::vector<std::string> two_micro{"train.micro_batch_size=1", "train.grad_accum_steps=2"};
  for (const std::string sharding : {"optim_grads_params", "optim"}) {
    const auto overlapped = train_tiny(dir.path(), 2, sharding, 1, two_micro);
    auto extra = two_micro;
    extra.push_back("parallel.overlap_grad_reduce=false");
    const auto waited = train_tiny(dir.path(), 2, sharding, 1, extra);
    REQUIRE(overlapped.size() == 20);
    REQUIRE(waited.size() == 20);
    for (std::size_t i = 0; i < waited.size(); ++i) {
      INFO(sharding << ", 2 micro-batches, step " << i + 1);
      CHECK(overlapped[i] == Approx(waited[i]).epsilon(1e-6));
    }
    if (sharding != "optim") continue;
    // train.global_batch_size = 4 over 2 ranks of micro-batch 1 is the same 2 micro-batches
    const auto global = train_tiny(dir.path(), 2, sharding, 1,
                                   {"train.micro_batch_size=1", "train.global_batch_size=4"});
    REQUIRE(global.size() == 20);
    for (std::size_t i = 0; i < global.size(); ++i) {
      INFO(sharding << ", train.global_batch_size=4, step " << i + 1);
      CHECK(global[i] == overlapped[i]);
    }
  }
}

// The first number after `key` in rank 0's log ("params 95104 B").
std::int64_t logged_number(const fs::path& runs, const std::string& key) {
  const auto log =
      muster::test::read_file(muster::test::only_run_dir(runs) / "logs" / "rank-0.log");
  const auto at = log.find(key);
  return at == std::string::npos ? -1 : std::stoll(log.substr(at + key.size()));
}

TEST_CASE(
    "the planner's per-rank parameter, gradient and optimizer bytes are what muster-train "
    "holds, and its FSDP buffers bound what it gathers",
    "[train_run]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "tiny.toml", kTinyJob);
  // 3 ranks: units whose size 3 does not divide are padded, as the planner counts them; 4 ranks
  // with EP 2: a rank holds half the experts, sharded over 2 expert-data-parallel ranks
  for (std::string sharding : {"no_shard", "optim", "optim_grads", "optim_grads_params"}) {
    // bf16: fp32 weights under autocast and fp32 gradients, a bf16 copy to reduce
    for (std::string variant : {"untied", "tied", "ep2", "bf16"}) {
      INFO(sharding << ", " << variant);
      const std::string world = variant == "ep2" ? "4" : "3";
      const bool bf16 = variant == "bf16";
      const std::vector<std::string> settings{
          "parallel.sharding=" + sharding,
          "model.tie_embeddings=" + std::string(variant == "tied" ? "true" : "false"),
          "parallel.expert=" + std::string(variant == "ep2" ? "2" : "1"),
          "train.precision=" + std::string(bf16 ? "bf16" : "fp32"),
          "train.grad_reduce_dtype=" + std::string(bf16 ? "bf16" : "fp32"),
          "train.micro_batch_size=1",
          "model.num_layers=8"};
      std::vector<std::string> plan{kMuster,        "plan",  (dir / "tiny.toml").string(),
                                    "--world",      world,   "--engine",
                                    "muster-train", "--json"};
      plan.insert(plan.end(), settings.begin(), settings.end());
      const auto planned = muster::test::run_process(plan);
      REQUIRE(planned.exit_code == 0);
      const auto worst = nlohmann::json::parse(planned.out)["memory"]["worst"];

      const auto runs = dir / (sharding + variant);
      std::vector<std::string> train{kMuster,
                                     "run",
                                     (dir / "tiny.toml").string(),
                                     "launch.runs_dir=" + runs.string(),
                                     "launch.nproc=" + world,
                                     "launch.tee=none",
                                     "train.steps=2"};
      train.insert(train.end(), settings.begin(), settings.end());
      train.insert(train.end(), {"--", kTrain});
      const auto r = muster::test::run_process(train, {{{"OMP_NUM_THREADS", "1"}}, {}});
      INFO("stderr: " << r.err);
      REQUIRE(r.exit_code == 0);
      CHECK(logged_number(runs, "params ") == worst["params"].get<std::int64_t>());
      CHECK(logged_number(runs, "grads ") == worst["grads"].get<std::int64_t>());
      CHECK(logged_number(runs, "optimizer ") == worst["optimizer"].get<std::int64_t>());
      const auto gathered = logged_number(runs, "at most ");
      CHECK(gathered <= worst["fsdp_buffers"].get<std::int64_t>());
      // nothing is kept between gathers: buffers are kept only as NCCL user buffers
      CHECK(logged_number(runs, "FSDP buffers kept: ") == 0);
      if (sharding == "optim_grads_params") {
        // two layers at a time (one computing, the next prefetched or the last reducing), and
        // the tied embedding whole: well under the model's params (3 ranks' shards, or 4's)
        CHECK(gathered > 0);
        CHECK(gathered * 4 < worst["params"].get<std::int64_t>() * 3 * 3);
      }
    }
  }
}

TEST_CASE(
    "a run resumed from its checkpoint continues the loss curve bit for bit, and the "
    "checkpoint is in Hugging Face's layout",
    "[train_run]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "tiny.toml", kTinyJob);
  const auto checkpoints = dir / "checkpoints";
  auto run = [&](const std::string& runs, int steps, std::vector<std::string> extra) {
    std::vector<std::string> argv{kMuster,
                                  "run",
                                  (dir / "tiny.toml").string(),
                                  "launch.runs_dir=" + (dir / runs).string(),
                                  "launch.nproc=2",
                                  "launch.tee=none",
                                  "parallel.expert=2",
                                  "parallel.sharding=optim_grads_params",
                                  "train.steps=" + std::to_string(steps)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const auto r = muster::test::run_process(argv, {{{"OMP_NUM_THREADS", "1"}}, {}});
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    std::vector<double> losses;  // rank 0's, exact (the run store keeps every digit)
    for (const auto& s :
         muster::store::run_reader(muster::test::only_run_dir(dir / runs)).steps()) {
      if (s.rank == 0) losses.push_back(s.loss);
      // each step says how long its rank waited in collectives: part of the step, and some
      CHECK(s.comm_wait_s > 0);
      CHECK(s.comm_wait_s <= s.step_time_s);
    }
    return losses;
  };
  const auto straight = run("straight", 20, {});
  // 10 steps with a checkpoint after the 10th; the run ends; a new run finds it and continues
  run("first", 10, {"checkpoint.interval=10", "checkpoint.dir=" + checkpoints.string()});
  const auto step10 = checkpoints / "step-00000010";
  REQUIRE(fs::exists(step10 / "model.safetensors.index.json"));
  CHECK(fs::exists(step10 / "model-00001-of-00002.safetensors"));
  CHECK(fs::exists(step10 / "model-00002-of-00002.safetensors"));
  CHECK(fs::exists(step10 / "optimizer" / "rank-00001.safetensors"));
  const auto index =
      nlohmann::json::parse(muster::test::read_file(step10 / "model.safetensors.index.json"));
  // each rank wrote its own experts of the MoE layers: 4 experts x 3 tensors x 2 layers
  int experts = 0;
  for (const auto& [name, file] : index["weight_map"].items())
    if (name.find(".mlp.experts.") != std::string::npos) ++experts;
  CHECK(experts == 4 * 3 * 2);
  CHECK(index["weight_map"]["model.embed_tokens.weight"].is_string());
  CHECK(nlohmann::json::parse(muster::test::read_file(step10 / "config.json"))["model_type"] ==
        "qwen3_moe");
  // a model it does not fit is refused, naming the tensors: the checkpoint's of layers or
  // experts the model lacks, and one whose shape differs
  auto refused = [&](const std::string& runs, const std::string& change) {
    const auto r = muster::test::run_process(
        {kMuster, "run", (dir / "tiny.toml").string(), "launch.runs_dir=" + (dir / runs).string(),
         "launch.nproc=2", "launch.tee=none", "parallel.expert=2", "train.steps=11",
         "checkpoint.load=" + step10.string(), change});
    CHECK(r.exit_code == 2);
    return r.err;
  };
  CHECK_THAT(refused("fewer-layers", "model.num_layers=1"),
             Catch::Contains("tensor(s) the model has no parameter for (model.layers.1.") &&
                 Catch::Contains("it is of a larger model"));
  CHECK_THAT(refused("fewer-experts", "model.num_experts=2"),
             Catch::Contains("tensor(s) the model has no parameter for "
                             "(model.layers.0.mlp.experts.2.down_proj.weight, "));
  CHECK_THAT(refused("narrower", "model.moe_ffn_hidden_size=16"),
             Catch::Contains("has shape [32, 32], the model's is [16, 32]"));
  // another layout: its optimizer state is sharded for its own, so only the weights and the
  // step are taken, when asked
  CHECK_THAT(refused("other-layout", "parallel.expert=1"),
             Catch::Contains("was saved with expert = 2, this run has 1") &&
                 Catch::Contains("set checkpoint.load_optim = false"));
  run("relayout", 11,
      {"parallel.expert=1", "parallel.sharding=no_shard", "checkpoint.load=" + step10.string(),
       "checkpoint.load_optim=false"});
  CHECK_THAT(
      muster::test::read_file(muster::test::only_run_dir(dir / "relayout") / "logs" / "rank-0.log"),
      Catch::Contains("continuing at step 11 with a fresh optimizer state"));
  // another global batch: the data goes on after the rows the checkpoint's steps read
  CHECK(nlohmann::json::parse(muster::test::read_file(
            step10 / "trainer_state.json"))["rows_consumed"] == 40);  // 10 steps x 2 ranks x 2 rows
  run("half-batch", 11,
      {"train.micro_batch_size=1", "checkpoint.load=" + step10.string(),
       "checkpoint.load_optim=false"});
  CHECK_THAT(muster::test::read_file(muster::test::only_run_dir(dir / "half-batch") / "logs" /
                                     "rank-0.log"),
             Catch::Contains("the checkpoint's steps read 40 data rows, at another global batch "
                             "than this run's 2: the data goes on after them"));
  // a checkpoint at train.steps already: nothing to train, said; named by the folder the step
  // directories are in, as Megatron's --load, for the newest of them
  run("done", 10, {"checkpoint.load=" + checkpoints.string()});
  CHECK_THAT(
      muster::test::read_file(muster::test::only_run_dir(dir / "done") / "logs" / "rank-0.log"),
      Catch::Contains("checkpoint.load = " + checkpoints.string() +
                      " holds step directories: loading the newest, " + step10.string()) &&
          Catch::Contains("train.steps = 10 are done already; nothing to train"));
  // and status shows the checkpoint's progress, not step 0
  const auto done_status = muster::test::run_process(
      {kMuster, "status", muster::test::only_run_dir(dir / "done").string()});
  CHECK_THAT(done_status.out, Catch::Contains("\nprogress  step 10 of 10\n"));
  // a model whose head is its embedding takes weights that ship lm_head.weight too (as some
  // Hugging Face tied models do): the head is not another layer
  const auto weights = dir / "weights-only";
  fs::create_directories(weights);
  for (const auto& e : fs::directory_iterator(step10))
    if (e.is_regular_file() && e.path().filename() != "trainer_state.json")
      fs::copy_file(e.path(), weights / e.path().filename());
  run("tied", 11, {"model.tie_embeddings=true", "checkpoint.load=" + weights.string()});
  CHECK_THAT(
      muster::test::read_file(muster::test::only_run_dir(dir / "tied") / "logs" / "rank-0.log"),
      Catch::Contains("loaded the weights of " + weights.string()));
  const auto resumed = run("resumed", 20, {"checkpoint.dir=" + checkpoints.string()});
  // its schedule is 20 steps', where the checkpoint's was 10: said, with the learning rate at
  // the step it resumes at under each (both still in warmup here, so the losses agree)
  CHECK_THAT(
      muster::test::read_file(muster::test::only_run_dir(dir / "resumed") / "logs" / "rank-0.log"),
      Catch::Contains("was trained on the schedule of train.steps = 10") &&
          Catch::Contains("this run has 20,") &&
          Catch::Contains("follows this run's schedule from step 11 on"));
  REQUIRE(straight.size() == 20);
  REQUIRE(resumed.size() == 10);
  for (std::size_t i = 0; i < 10; ++i) {
    INFO("step " << i + 11);
    CHECK(resumed[i] == straight[i + 10]);
  }
}

// The run directory under `runs` once its rank 1 has done `steps` steps (its heartbeat says so),
// or nothing after 60 s.
std::optional<fs::path> wait_for_steps(const fs::path& runs, int steps) {
  for (int i = 0; i < 600; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::error_code none_yet;
    for (const auto& run : fs::directory_iterator(runs, none_yet)) {
      const auto file = run.path() / "logs" / "rank-1.heartbeat";
      const auto beat = fs::exists(file) ? muster::test::read_file(file) : std::string();
      if (beat.rfind("step=", 0) == 0 && beat.back() == '\n' && std::stoi(beat.substr(5)) >= steps)
        return run.path();
    }
  }
  return std::nullopt;
}

// The steps of the checkpoints under `root` (step-00000012 -> 12), ascending.
std::vector<int> checkpoint_steps(const fs::path& root) {
  std::vector<int> steps;
  std::error_code missing;
  for (const auto& e : fs::directory_iterator(root, missing))
    if (const auto name = e.path().filename().string();
        name.rfind("step-", 0) == 0 && name.find('.') == std::string::npos)
      steps.push_back(std::stoi(name.substr(5)));
  std::sort(steps.begin(), steps.end());
  return steps;
}

TEST_CASE(
    "SIGUSR1 to the launcher makes every rank save the same step and stop, and the next run "
    "resumes there",
    "[train_run]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "tiny.toml", kTinyJob);
  const auto checkpoints = dir / "checkpoints";
  const std::vector<std::string> common{"launch.nproc=2", "launch.tee=none", "parallel.expert=2",
                                        "parallel.sharding=optim_grads_params",
                                        "checkpoint.dir=" + checkpoints.string()};
  std::vector<std::string> argv{kMuster, "run", (dir / "tiny.toml").string(),
                                "launch.runs_dir=" + (dir / "first").string(),
                                "train.steps=100000"};
  argv.insert(argv.end(), common.begin(), common.end());
  // two threads a rank: OpenBLAS then starts its pool before main, and those threads take
  // signals too (they killed the rank unsaved)
  const pid_t launcher =
      muster::test::spawn_logged(argv, {{{"OMP_NUM_THREADS", "2"}}, {}}, dir / "first.log");
  // Wait for a few steps of rank 1, then signal the launcher (as Slurm's --signal=B:USR1 does).
  const bool trained = wait_for_steps(dir / "first", 3).has_value();
  if (!trained) ::kill(launcher, SIGKILL);
  REQUIRE(trained);
  ::kill(launcher, SIGUSR1);
  const auto ended = muster::test::wait_process(launcher);
  INFO("launcher log: " << muster::test::read_file(dir / "first.log"));
  CHECK(ended.exit_code != 0);  // stopped before train.steps, as signalled
  const auto saved = checkpoint_steps(checkpoints);
  REQUIRE(saved.size() == 1);
  const int step = saved[0];
  CHECK(step >= 3);
  const auto run_dir = muster::test::only_run_dir(dir / "first");
  std::set<std::string> peaks;  // the peak each rank's MFU is of: one, the fastest rank's
  for (int rank : {0, 1}) {
    const auto log = muster::test::read_file(run_dir / "logs" / fmt::format("rank-{}.log", rank));
    const auto against = log.find(" against ");
    REQUIRE(against != std::string::npos);
    peaks.insert(log.substr(against, log.find('\n', against) - against));
    CHECK_THAT(log, Catch::Contains("the fastest of 2 ranks'"));
    CHECK_THAT(log, Catch::Contains(
                        fmt::format("saved checkpoint {}",
                                    (checkpoints / fmt::format("step-{:08d}", step)).string())));
    CHECK_THAT(log, Catch::Contains(fmt::format("stopping after step {}", step)));
  }
  CHECK(peaks.size() == 1);
  CHECK(fs::exists(checkpoints / fmt::format("step-{:08d}", step) /
                   "model-00002-of-00002.safetensors"));
  // diagnose: stopped as asked, and where it goes on from
  const auto diagnosis = muster::test::run_process({kMuster, "diagnose", run_dir.string()});
  INFO("diagnose: " << diagnosis.out << diagnosis.err);
  CHECK(diagnosis.exit_code == 0);
  CHECK_THAT(diagnosis.out,
             Catch::Contains("the run was stopped as asked") &&
                 Catch::Contains("resume: its newest checkpoint is " +
                                 (checkpoints / fmt::format("step-{:08d}", step)).string()));

  // The next run picks the checkpoint up and goes on from the step after it.
  argv = {kMuster, "run", (dir / "tiny.toml").string(),
          "launch.runs_dir=" + (dir / "second").string(),
          "train.steps=" + std::to_string(step + 2)};
  argv.insert(argv.end(), common.begin(), common.end());
  const auto r = muster::test::run_process(argv, {{{"OMP_NUM_THREADS", "1"}}, {}});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  const auto steps = muster::store::run_reader(muster::test::only_run_dir(dir / "second")).steps();
  REQUIRE(steps.size() == 4);  // 2 steps x 2 ranks
  CHECK(steps.front().step == step);

  // a program of the user's own with the same checkpoint.dir: muster-train's checkpoints are no
  // place for it to go on from
  argv = {kMuster, "run", (dir / "tiny.toml").string(), "launch.runs_dir=" + (dir / "own").string()};
  argv.insert(argv.end(), common.begin(), common.end());
  argv.insert(argv.end(), {"--", std::string(MUSTER_BIN_DIR) + "/muster-test-worker",
                           "--exit-code", "1"});
  CHECK(muster::test::run_process(argv).exit_code == 1);
  const auto own = muster::test::run_process(
      {kMuster, "diagnose", muster::test::only_run_dir(dir / "own").string()});
  CHECK_THAT(own.out, Catch::Contains("failed") && !Catch::Contains("resume:"));
}

TEST_CASE(
    "a rank killed mid-run: the others' collective fails at once, saying how soon, and diagnose "
    "blames the kill",
    "[train_run]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "tiny.toml", kTinyJob);
  const pid_t launcher = muster::test::spawn_logged(
      {kMuster, "run", (dir / "tiny.toml").string(), "launch.runs_dir=" + (dir / "runs").string(),
       "launch.nproc=2", "launch.tee=none", "launch.kill_grace=2", "comm.timeout=600",
       "train.steps=100000", "--", kTrain},
      {{{"OMP_NUM_THREADS", "1"}}, {}}, dir / "launcher.log");
  std::optional<pid_t> victim;
  if (const auto run = wait_for_steps(dir / "runs", 3))
    for (const auto& r : muster::store::run_reader(*run).ranks())
      if (r.rank == 1 && r.pid) victim = static_cast<pid_t>(*r.pid);
  if (!victim) ::kill(launcher, SIGKILL);
  REQUIRE(victim);
  ::kill(*victim, SIGKILL);
  const auto ended = muster::test::wait_process(launcher);
  INFO("launcher log: " << muster::test::read_file(dir / "launcher.log"));
  CHECK(ended.exit_code != 0);
  const auto run_dir = muster::test::only_run_dir(dir / "runs");
  // rank 0's line, if it wrote one before the launcher stopped it: a failure, not a timeout
  for (const auto& e : muster::store::run_reader(run_dir).errors()) {
    INFO(e.message);
    CHECK_THAT(e.message, Catch::Contains(" ms (timeout 600000 ms); not arrived: ") &&
                              !Catch::Contains("timed out"));
    CHECK(e.kind == "collective_error");
  }
  const auto diagnosed =
      muster::test::run_process({kMuster, "diagnose", run_dir.string(), "--json"});
  INFO(diagnosed.out << diagnosed.err);
  const auto doc = nlohmann::json::parse(diagnosed.out);
  REQUIRE_FALSE(doc["findings"].empty());
  CHECK(doc["findings"][0]["category"] == "worker_killed_sigkill");
  CHECK(doc["findings"][0]["ranks"] == nlohmann::json::array({1}));
  for (const auto& f : doc["findings"]) {
    INFO(f.dump());
    if (f["category"] != "nccl_timeout_cascade") continue;
    CHECK(f["facts"].contains("failed_ms"));
    CHECK(f["facts"]["timeout_ms"] == "600000");
    CHECK_THAT(f["summary"].get<std::string>(),
               Catch::Contains("failed after ") && Catch::Contains("before its 600000 ms timeout"));
  }
}

TEST_CASE(
    "a rank stuck mid-run makes the others' collective time out, recorded with its phase "
    "and step",
    "[train_run]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "tiny.toml", kTinyJob);
  const pid_t launcher = muster::test::spawn_logged(
      {kMuster, "run", (dir / "tiny.toml").string(), "launch.runs_dir=" + (dir / "runs").string(),
       "launch.nproc=2", "launch.tee=none", "launch.kill_grace=2", "comm.timeout=3",
       "train.steps=100000", "--", kTrain},
      {{{"OMP_NUM_THREADS", "1"}}, {}}, dir / "launcher.log");
  // Rank 1 stops (SIGSTOP: a stuck process, as a hung GPU or a paused VM leaves it) after a
  // few steps; rank 0 waits for it in its next collective.
  std::optional<pid_t> stuck;
  if (const auto run = wait_for_steps(dir / "runs", 3))
    for (const auto& r : muster::store::run_reader(*run).ranks())
      if (r.rank == 1 && r.pid) stuck = static_cast<pid_t>(*r.pid);
  if (!stuck) ::kill(launcher, SIGKILL);
  REQUIRE(stuck);
  ::kill(*stuck, SIGSTOP);
  const auto ended = muster::test::wait_process(launcher);
  ::kill(*stuck, SIGKILL);  // in case the launcher left it (it should not have)
  INFO("launcher log: " << muster::test::read_file(dir / "launcher.log"));
  CHECK(ended.exit_code != 0);
  const auto errors = muster::store::run_reader(muster::test::only_run_dir(dir / "runs")).errors();
  REQUIRE_FALSE(errors.empty());
  const auto& e = errors.front();
  CHECK(e.rank == 0);
  CHECK(e.kind == "collective_timeout");
  CHECK((e.phase == "forward" || e.phase == "backward" || e.phase == "optimizer" ||
         e.phase == "data"));
  REQUIRE(e.step);
  CHECK(*e.step >= 3);
  CHECK_THAT(e.message, Catch::Contains(" timed out after 3000 ms; not arrived: "));
  // and muster status shows it
  const auto status = muster::test::run_process(
      {kMuster, "status", muster::test::only_run_dir(dir / "runs").string()});
  CHECK_THAT(status.out,
             Catch::Contains("error     rank 0, step ") && Catch::Contains("(collective_timeout)"));
  // and muster diagnose reads the engine's line as the timeout it is (the line as written, not
  // a copy of its format)
  const auto diagnosed = muster::test::run_process(
      {kMuster, "diagnose", muster::test::only_run_dir(dir / "runs").string(), "--json"});
  INFO(diagnosed.out << diagnosed.err);
  const auto doc = nlohmann::json::parse(diagnosed.out);
  bool timeout = false;
  for (const auto& f : doc["findings"])
    if (f["category"] == "nccl_timeout" || f["category"] == "nccl_timeout_cascade") {
      timeout = true;
      CHECK(f["facts"]["timeout_ms"] == "3000");
      CHECK_FALSE(f["facts"].contains("failed_ms"));
      CHECK_THAT(f["summary"].get<std::string>(), Catch::Contains("timed out after 3000 ms"));
    }
  CHECK(timeout);
}

TEST_CASE("train.profile_step_start profiles those steps on every rank, and training goes on",
          "[train_run][profiler]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "tiny.toml", kTinyJob);
  auto r = muster::test::run_process(
      {kMuster, "run", (dir / "tiny.toml").string(), "launch.runs_dir=" + (dir / "runs").string(),
       "launch.nproc=2", "train.profile_step_start=2", "train.profile_step_end=3", "--", kTrain});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("profile of steps 2..3 on rank 0: ") &&
                        Catch::Contains("step 5/5 | loss "));
  const auto run = muster::test::only_run_dir(dir / "runs");
  for (const auto* rank : {"rank-0.txt", "rank-1.txt"}) {
    const auto text = muster::test::read_file(run / "profile" / rank);
    INFO(rank << ":\n" << text);
    // the trainer's phases as named ranges, and the ops under them
    CHECK_THAT(text, Catch::Contains("muster::forward") && Catch::Contains("muster::backward") &&
                         Catch::Contains("muster::optimizer") && Catch::Contains("aten::"));
    CHECK_THAT(text, Catch::StartsWith(std::string("profile of steps 2..3 on rank ") + rank[5]));
    CHECK(muster::test::profiled_calls(text, "muster::forward") == 2);  // a micro-batch a step
  }
}
