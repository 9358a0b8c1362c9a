// Tests of the job file (common/job_config.hpp) and of etc/examples/job.toml.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <filesystem>

#include "common/error.hpp"
#include "common/job_config.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

const std::filesystem::path kExample =
    std::filesystem::path(MUSTER_SOURCE_DIR) / "etc/examples/job.toml";

std::string load_error(const std::string& text, std::vector<std::string> overrides = {}) {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "job.toml", text);
  INFO("job file: " << text);
  return muster::test::expect_error(muster::errc::config,
                                    [&] { muster::load_job_config(dir / "job.toml", overrides); });
}

}  // namespace

TEST_CASE("the example job file sets every key to its default", "[job_config]") {
  auto loaded = muster::load_job_config(kExample, {});
  for (const auto& field : muster::job_config_schema()) {
    INFO("key " << field.key);
    CHECK(loaded.where.count(std::string(field.key)) == 1);  // written in the example
  }
  CHECK(muster::to_toml(loaded.config, false) == muster::to_toml(muster::job_config{}, false));
}

TEST_CASE("job config loads a file, then overrides, then validates", "[job_config]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "job.toml", "[launch]\nnproc = 4\n[job]\nname = \"moe-a\"\n");
  std::vector<std::string> overrides = {"launch.nproc=8"};
  auto loaded = muster::load_job_config(dir / "job.toml", overrides);
  CHECK(loaded.config.launch.nproc == 8);
  CHECK(loaded.config.job.name == "moe-a");
  CHECK(loaded.config.launch.runs_dir == "./muster-runs");
  CHECK(muster::load_job_config("", {}).config.launch.nproc == 0);
}

TEST_CASE("relative data and checkpoint paths are made absolute from the current directory",
          "[job_config]") {
  muster::test::temp_dir dir, elsewhere;
  muster::test::write_file(dir / "job.toml",
                           "[data]\npaths = [\"corpus/a\", \"/srv/b\"]\n[checkpoint]\n"
                           "dir = \"ckpt/../ckpt2\"\n");
  const std::vector<std::string> overrides = {"checkpoint.load=old/step-00000010"};
  const auto loaded = [&] {
    struct back_to {  // the working directory returns whatever loading does
      std::filesystem::path where = std::filesystem::current_path();
      ~back_to() { std::filesystem::current_path(where); }
    } restore;
    std::filesystem::current_path(elsewhere.path());
    return muster::load_job_config(dir / "job.toml", overrides);
  }();
  const auto from = std::filesystem::canonical(elsewhere.path());
  CHECK(loaded.config.data.paths ==
        std::vector<std::string>{(from / "corpus/a").string(), "/srv/b"});
  CHECK(loaded.config.checkpoint.dir == (from / "ckpt2").string());
  CHECK(loaded.config.checkpoint.load == (from / "old/step-00000010").string());
  CHECK(loaded.config.launch.runs_dir == "./muster-runs");  // the launcher resolves its own
  CHECK(loaded.made_absolute ==
        std::vector<std::string>{"data.paths", "checkpoint.dir", "checkpoint.load"});
  CHECK(muster::made_absolute_overrides(loaded) ==
        std::vector<std::string>{
            fmt::format("data.paths=[\"{}\", \"/srv/b\"]", (from / "corpus/a").string()),
            "checkpoint.dir=\"" + (from / "ckpt2").string() + "\"",
            "checkpoint.load=\"" + (from / "old/step-00000010").string() + "\""});
  // absolute and empty paths stay as they are
  const std::vector<std::string> absolute = {"checkpoint.dir=/x/y"};
  const auto plain = muster::load_job_config("", absolute);
  CHECK(plain.made_absolute.empty());
  CHECK(plain.config.checkpoint.load.empty());
}

TEST_CASE("job config validation names the place and the fix", "[job_config]") {
  // a value below the least says what the least means, from the key's own documentation
  CHECK_THAT(load_error("[checkpoint]\nkeep = -1\n"),
             Catch::EndsWith("checkpoint.keep: -1 is below 0; use 0 or more (0 = all)"));
  CHECK_THAT(load_error("[checkpoint]\ninterval = -5\n"),
             Catch::EndsWith("checkpoint.interval: -5 is below -1; use -1 or more (-1 = only when "
                             "signalled)"));
  CHECK_THAT(load_error("[train]\nwarmup_steps = -1\n"),
             Catch::EndsWith("train.warmup_steps: -1 is below 0; use 0 or more"));
  CHECK_THAT(load_error("[parallel]\ndata = -1\n"),
             Catch::EndsWith("use 0 or more (0 = derived: world / (tensor * pipeline * context))"));
  CHECK_THAT(load_error("[launch]\nnproc = -1\n"),
             Catch::Matches(".*job.toml:2:9: launch.nproc: -1 is negative; use the number of ranks "
                            "per node, or 0 for one per GPU"));
  CHECK_THAT(
      load_error("[job]\nname = \"a/b\"\n"),
      Catch::Contains("job.toml:2:8: job.name: the name 'a/b': character '/' at offset 1 is not "
                      "allowed in a file name"));
  CHECK_THAT(load_error("[job]\nname = \"-x\"\n"),
             Catch::Contains("must not start with '.' or '-'"));
  CHECK_THAT(load_error("", {"job.name=.."}),
             Catch::Contains("command line 'job.name=..': job.name"));
  CHECK_THAT(load_error("[log]\nlevel = \"loud\"\n"),
             Catch::Contains("job.toml:2:9: log.level: unknown level \"loud\"; use one of trace"));
  CHECK_THAT(load_error("[launch]\nruns_dir = \"\"\n"),
             Catch::Contains("launch.runs_dir is empty"));
  CHECK_THAT(load_error("[launch]\nnprocs = 2\n"),
             Catch::Contains("unknown key 'launch.nprocs'; did you mean 'launch.nproc'?"));
  // the job's own sections: a misspelled header names its section, not a key near it
  for (const auto& [header, section] : std::vector<std::pair<std::string, std::string>>{
           {"dat", "data"}, {"lgo", "log"}, {"trian", "train"}})
    CHECK_THAT(
        load_error("[" + header + "]\n"),
        Catch::Contains("unknown section '" + header + "'; did you mean [" + section + "]?"));
  // a key cut short or run on names the key it starts, or that starts it
  CHECK_THAT(load_error("", {"train.micro_batch=4"}),
             Catch::EndsWith("unknown key 'train.micro_batch'; did you mean "
                             "'train.micro_batch_size'?"));
  CHECK_THAT(load_error("", {"parallel.expert_parallel=8"}),
             Catch::EndsWith("unknown key 'parallel.expert_parallel'; did you mean "
                             "'parallel.expert'?"));
  // every override's mistake at once
  CHECK_THAT(load_error("", {"train.micro_batch=4", "launch.nproc=x", "job.name=ok"}),
             Catch::StartsWith("the command line has 2 problems:\n  command line "
                               "'train.micro_batch=4'") &&
                 Catch::Contains("\n  command line 'launch.nproc=x': launch.nproc: expected"));
}

TEST_CASE("every wrong key of a file is listed in file order, and every broken section rule",
          "[job_config]") {
  // a std::map walks keys by name (baz before foo): the list keeps the file's order
  const auto keys = load_error("[train]\nfoo_bar = 1\nbaz_qux = 2\nsteps = \"x\"\n");
  CHECK_THAT(keys, Catch::StartsWith("3 keys are wrong:\n"));
  const auto foo = keys.find("job.toml:2:1: unknown key 'train.foo_bar'");
  const auto baz = keys.find("job.toml:3:1: unknown key 'train.baz_qux'");
  const auto steps = keys.find("job.toml:4:9: train.steps: expected an integer");
  CHECK(foo < baz);
  CHECK(baz < steps);
  CHECK(steps != std::string::npos);
  // one wrong key reads as before
  CHECK_THAT(
      load_error("[train]\nfoo_bar = 1\n"),
      Catch::Contains("job.toml:2:1: unknown key 'train.foo_bar'") && !Catch::Contains("wrong:"));
  // rules of several sections, each named
  const auto rules =
      load_error("", {"launch.nproc=-1", "train.profile_step_start=5", "train.profile_step_end=2"});
  CHECK_THAT(rules, Catch::StartsWith("the job has 2 problems:\n") &&
                        Catch::Contains("launch.nproc: -1 is negative") &&
                        Catch::Contains("train.profile_step_end = 2 with"));
  // every broken rule of a section, not only its first; the rules that rest on a section's
  // sizes (divisions) wait for those
  const auto sizes =
      load_error("", {"model.num_layers=0", "model.vocab_size=0", "model.num_attention_heads=5",
                      "launch.tee=some", "launch.nproc=-1"});
  CHECK_THAT(sizes, Catch::StartsWith("the job has 4 problems:\n") &&
                        Catch::Contains("model.num_layers: 0 is below 1") &&
                        Catch::Contains("model.vocab_size: 0 is below 1") &&
                        Catch::Contains("launch.nproc: -1 is negative") &&
                        Catch::Contains("launch.tee: unknown value \"some\"") &&
                        !Catch::Contains("does not divide"));
  // the train section's rules that compare with nothing wrong still speak beside train.steps
  // = 0, and each optimizer setting out of range is named on its own
  const auto train = load_error(
      "[train]\nsteps = 0\nlr = -1\nadam_beta1 = 1.5\n"
      "weight_decay = -3\nprofile_step_start = 5\nprofile_step_end = "
      "2\n");
  CHECK_THAT(train, Catch::StartsWith("the job has 5 problems:\n") &&
                        Catch::Contains("job.toml:2:9: train.steps: 0 is below 1") &&
                        Catch::Contains("job.toml:3:6: train.lr = -1") &&
                        Catch::Contains("job.toml:4:14: train.adam_beta1: 1.5 is outside [0, 1)") &&
                        Catch::Contains("job.toml:5:16: train.weight_decay: -3 is negative") &&
                        Catch::Contains("train.profile_step_end = 2 with"));
  // a string left open names the line's fix
  CHECK_THAT(load_error("[job]\nname = \"x\n"),
             Catch::Contains("a string on this line is not closed: end it with \" on the same "
                             "line"));
  const auto splits = load_error("", {"model.num_attention_heads=5", "model.moe_router_topk=9"});
  CHECK_THAT(splits, Catch::StartsWith("the job has 3 problems:\n") &&
                         Catch::Contains("5 does not divide model.hidden_size 256") &&
                         Catch::Contains("model.num_query_groups: 4 does not divide the 5") &&
                         Catch::Contains("model.moe_router_topk: 9 is not between 1 and the 8"));
}

TEST_CASE("a key under Megatron's or torchrun's name, or in another section, gets muster's",
          "[job_config]") {
  CHECK_THAT(load_error("[parallel]\ntensor_model_parallel_size = 2\n"),
             Catch::Contains("unknown key 'parallel.tensor_model_parallel_size'; Megatron's "
                             "--tensor-model-parallel-size is 'parallel.tensor' in muster"));
  CHECK_THAT(load_error("[train]\ntrain-iters = 10\n"),
             Catch::Contains("Megatron's --train-iters is 'train.steps' in muster"));
  CHECK_THAT(load_error("", {"use_distributed_optimizer=true"}),
             Catch::Contains("Megatron's --use-distributed-optimizer is parallel.sharding = "
                             "\"optim\" in muster"));
  CHECK_THAT(load_error("", {"nproc_per_node=8"}),
             Catch::Contains("torchrun's --nproc-per-node is 'launch.nproc' in muster"));
  CHECK_THAT(load_error("[parallel]\nnum_experts = 8\n"),
             Catch::Contains("unknown key 'parallel.num_experts'; did you mean "
                             "'model.num_experts'? (in [model])"));
}

TEST_CASE("job config printed as TOML round-trips through the loader", "[job_config]") {
  muster::job_config c;
  c.job.name = "x1";
  c.launch.nproc = 3;
  c.log.level = "debug";
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "resolved.toml", muster::to_toml(c, true));
  auto back = muster::load_job_config(dir / "resolved.toml", {});
  CHECK(muster::to_toml(back.config, false) == muster::to_toml(c, false));
}

TEST_CASE("every example job file loads and validates", "[job_config]") {
  int examples = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kExample.parent_path())) {
    if (entry.path().extension() != ".toml") continue;
    INFO("example " << entry.path());
    CHECK_NOTHROW(muster::load_job_config(entry.path(), {}));
    ++examples;
  }
  CHECK(examples >= 2);
}

TEST_CASE("the parallel, model and train sections are validated with the fix", "[job_config]") {
  CHECK_THAT(load_error("", {"parallel.order=tp-cp-xx-dp-pp"}),
             Catch::Contains("parallel.order: \"tp-cp-xx-dp-pp\": \"xx\" is not a dimension"));
  CHECK_THAT(load_error("", {"parallel.order=tp-tp"}), Catch::Contains("\"tp\" is given twice"));
  CHECK_NOTHROW(muster::load_job_config("", std::vector<std::string>{"parallel.order=TP-PP-DP"}));
  CHECK_THAT(load_error("[parallel]\ntensor = 0\n"),
             Catch::Contains("job.toml:2:10: parallel.tensor: 0 is below 1; use 1 or more"));
  CHECK_THAT(load_error("[parallel]\nsharding = \"zero_three\"\n"),
             Catch::Contains("parallel.sharding: unknown value \"zero_three\"; use one of "
                             "no_shard, optim, optim_grads, optim_grads_params"));
  // other tools' names for a strategy get ours
  CHECK_THAT(load_error("[parallel]\nsharding = \"zero3\"\n"),
             Catch::Contains("job.toml:2:12: parallel.sharding: \"zero3\" is called "
                             "optim_grads_params here; write parallel.sharding = "
                             "\"optim_grads_params\""));
  CHECK_THAT(load_error("", {"parallel.sharding=FULL_SHARD"}),
             Catch::Contains("\"FULL_SHARD\" is called optim_grads_params here"));
  CHECK_THAT(load_error("", {"parallel.sharding=shard_grad_op"}),
             Catch::Contains("is called optim_grads here"));
  CHECK_THAT(load_error("", {"parallel.sharding=zero-1"}), Catch::Contains("is called optim here"));
  CHECK_THAT(load_error("", {"train.precision=fp16"}),
             Catch::Contains("train.precision: unknown value \"fp16\"; use one of bf16, fp32"));
  CHECK_THAT(load_error("", {"train.expert_gemm=cutlass"}),
             Catch::Contains("train.expert_gemm: unknown value \"cutlass\"; use one of auto, "
                             "grouped, per_expert, split"));
  CHECK_THAT(load_error("", {"model.moe_router_topk=9"}),
             Catch::Contains("model.moe_router_topk: 9 is not between 1 and the 8 experts"));
  CHECK_THAT(load_error("", {"model.moe_capacity_factor=0.5"}),
             Catch::Contains("0.5 drops tokens even when the load is balanced"));
  CHECK_THAT(load_error("", {"model.num_query_groups=3"}),
             Catch::Contains("model.num_query_groups: 3 does not divide the 8 attention heads"));
  CHECK_THAT(load_error("", {"model.kv_lora_rank=512"}),
             Catch::Contains("multi-latent attention needs model.qk_rope_head_dim"));
  CHECK_THAT(load_error("[train]\nprofile_step_start = 5\nprofile_step_end = 3\n"),
             Catch::Contains("job.toml:3:20: train.profile_step_end = 3 with "
                             "train.profile_step_start = 5: the last profiled step must be at or "
                             "after the first"));
  CHECK_THAT(load_error("", {"train.profile_step_end=4"}),
             Catch::Contains("train.profile_step_end = 4 with train.profile_step_start = 0"));
  CHECK_NOTHROW(muster::load_job_config(
      "", std::vector<std::string>{"train.profile_step_start=2", "train.profile_step_end=2"}));
  CHECK_THAT(load_error("", {"train.steps=10", "train.profile_step_start=11"}),
             Catch::Contains("train.profile_step_start = 11 is past the run's last step "
                             "(train.steps = 10)"));
  CHECK_THAT(load_error("[model]\nconfig_json = \"nosuch.json\"\n"),
             Catch::Matches(".*job.toml:2:15: model.config_json: .*/nosuch.json: cannot read the "
                            "Hugging Face config.*"));
}

TEST_CASE("slurm.time takes Slurm's time formats and refuses others, naming them", "[job_config]") {
  using muster::slurm_time_seconds;
  CHECK(slurm_time_seconds("90") == 90 * 60);                         // minutes
  CHECK(slurm_time_seconds("5:30") == 5 * 60 + 30);                   // MM:SS
  CHECK(slurm_time_seconds("90:00") == 90 * 60);                      // Slurm bounds no field
  CHECK(slurm_time_seconds("0:05:00") == 300);                        // HH:MM:SS
  CHECK(slurm_time_seconds("2-12") == 2 * 86400 + 12 * 3600);         // D-HH
  CHECK(slurm_time_seconds("1-02:03") == 86400 + 2 * 3600 + 3 * 60);  // D-HH:MM
  CHECK(slurm_time_seconds("1-00:00:01") == 86400 + 1);               // D-HH:MM:SS
  CHECK(slurm_time_seconds("0") == 0);                                // no limit, as the words
  CHECK(slurm_time_seconds("UNLIMITED") == 0);
  CHECK(slurm_time_seconds("infinite") == 0);
  for (const char* bad : {"banana", "", "10min", "1:2:3:4", "1-2:3:4:5", "-5", "1-", ":30", "1::2",
                          "1--2", "4:00:00 ", "1.5", "1234567890"}) {
    INFO("slurm.time = " << bad);
    CHECK_FALSE(slurm_time_seconds(bad));
  }
  CHECK_THAT(load_error("[slurm]\ntime = \"banana\"\n"),
             Catch::Contains("job.toml:2:8: slurm.time: \"banana\" is not a Slurm time limit; use "
                             "minutes (\"90\"), MM:SS, HH:MM:SS (\"4:00:00\"), D-HH, D-HH:MM or "
                             "D-HH:MM:SS (\"1-00:00:00\"), \"UNLIMITED\""));
  CHECK_THAT(load_error("", {"slurm.time=4h"}),
             Catch::Contains("command line 'slurm.time=4h': slurm.time: \"4h\" is not"));
  for (const char* good : {"", "30", "4:00:00", "1-00:00:00", "UNLIMITED"}) {
    INFO("slurm.time = " << good);
    CHECK_NOTHROW(
        muster::load_job_config("", std::vector<std::string>{std::string("slurm.time=") + good}));
  }
}
