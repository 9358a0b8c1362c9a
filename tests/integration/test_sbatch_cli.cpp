// muster-sbatch before and at sbatch, with Slurm's own sbatch: a layout muster launch would
// refuse is refused before the queue, and what sbatch refuses names the [slurm] keys behind it.
// sbatch reads a slurm.conf of its own (no controller: it refuses the options first).
#include <catch2/catch.hpp>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/slurm_cluster.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

const std::string kSbatch = std::string(MUSTER_BIN_DIR) + "/muster-sbatch";

}  // namespace

TEST_CASE("muster-sbatch refuses a layout the job's world cannot hold before submitting it",
          "[sbatch]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "job.toml", "[launch]\nnproc = 2\n[slurm]\nnodes = 2\n");
  const auto r = muster::test::run_process({kSbatch, (dir / "job.toml").string(),
                                            "parallel.expert=3", "--dry-run"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());  // no script shown
  CHECK_THAT(r.err, Catch::Contains("command line 'parallel.expert=3': parallel.expert = 3") &&
                        Catch::Contains("the world of 4 ranks (slurm.nodes = 2 x launch.nproc "
                                        "= 2)") &&
                        Catch::Contains("try parallel.expert = "));
  // one that fits is shown
  const auto ok = muster::test::run_process(
      {kSbatch, (dir / "job.toml").string(), "parallel.expert=2", "--dry-run"});
  CHECK(ok.exit_code == 0);
  CHECK_THAT(ok.out, Catch::Contains("#SBATCH --nodes=2"));
  CHECK_THAT(ok.err, !Catch::Contains("warning"));
  // an sbatch option that sets the world wins over [slurm]: the start checks the layout then
  const auto four = muster::test::run_process(
      {kSbatch, (dir / "job.toml").string(), "parallel.expert=3", "--nodes=3", "--dry-run"});
  CHECK(four.exit_code == 0);
  CHECK_THAT(four.err, Catch::Contains("note: --nodes=3 sets the world"));
  // a task count conflicts with the script's one launcher a node: refused with what to give
  for (const std::vector<std::string>& tasks :
       {std::vector<std::string>{"--ntasks=2"}, {"-n", "2"}, {"-n2"}, {"--ntasks-per-node=8"}}) {
    std::vector<std::string> argv{kSbatch, (dir / "job.toml").string(), "--dry-run"};
    argv.insert(argv.end(), tasks.begin(), tasks.end());
    const auto refused = muster::test::run_process(argv);
    INFO(tasks.front() << ": " << refused.err);
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.err, Catch::Contains("sbatch option " + tasks.front() +
                                            ": muster-sbatch's script runs one muster launch a "
                                            "node") &&
                                Catch::Contains("Give the nodes (--nodes N or slurm.nodes) and "
                                                "launch.nproc instead"));
  }
  // torchrun's node count, which sbatch has not
  const auto nnodes = muster::test::run_process(
      {kSbatch, (dir / "job.toml").string(), "--dry-run", "--nnodes", "2"});
  CHECK(nnodes.exit_code == 2);
  CHECK_THAT(nnodes.err, Catch::Contains("sbatch option --nnodes: torchrun's name; sbatch's is "
                                         "--nodes N (or set slurm.nodes in the job file)"));
  // a time limit with no pre-timeout checkpoint: said before submitting
  const auto no_lead =
      muster::test::run_process({kSbatch, (dir / "job.toml").string(), "slurm.time=1:00:00",
                                 "slurm.checkpoint_lead=0", "--dry-run"});
  CHECK(no_lead.exit_code == 0);
  CHECK_THAT(no_lead.err,
             Catch::Contains("warning: slurm.checkpoint_lead = 0 (command line "
                             "'slurm.checkpoint_lead=0'): nothing saves at the time limit"));
}

TEST_CASE("muster-sbatch says at submit that muster-train's data is not there", "[sbatch]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "job.toml", "[job]\nname = \"nodata\"\n");
  const auto missing = (dir / "no-such-data").string();
  const auto r = muster::test::run_process(
      {kSbatch, (dir / "job.toml").string(), "data.paths=[\"" + missing + "\"]", "--dry-run"});
  CHECK(r.exit_code == 0);  // its nodes may see what this host does not
  CHECK_THAT(r.err, Catch::Contains("muster-sbatch: warning: data.paths: " + missing +
                                    " does not exist") &&
                        Catch::Contains("seen from this host"));
  // a program of the user's own reads its own data
  const auto own = muster::test::run_process({kSbatch, (dir / "job.toml").string(),
                                              "data.paths=[\"" + missing + "\"]", "--dry-run", "--",
                                              "python3", "train.py"});
  CHECK_THAT(own.err, !Catch::Contains("data.paths"));
}

TEST_CASE("muster-sbatch links the run's slurm.out to the user's --output", "[sbatch]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "job.toml", "[job]\nname = \"outtest\"\n");
  // relative to sbatch's --chdir, as sbatch takes it
  const auto r = muster::test::run_process({kSbatch, (dir / "job.toml").string(), "-J", "renamed",
                                            "--chdir=" + dir.path().string(),
                                            "--output=logs/%x-%j.out", "--dry-run"});
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("ln -sfn \"" + (dir / "logs").string() +
                                    "/renamed-${SLURM_JOB_ID}.out\" \"$run_dir/slurm.out\""));
}

TEST_CASE("muster-sbatch --dry-run writes nothing and says where the script would go", "[sbatch]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "job.toml", "[job]\nname = \"dry\"\n");
  const auto runs = dir / "runs";
  const auto r = muster::test::run_process({kSbatch, (dir / "job.toml").string(), "--qos=high",
                                            "launch.runs_dir=" + runs.string(), "--dry-run"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_FALSE(std::filesystem::exists(runs));  // not the script, not its folder
  const auto tail = r.out.substr(r.out.find("\n# --dry-run"));
  CHECK_THAT(tail, Catch::StartsWith("\n# --dry-run: nothing written, nothing submitted. Without "
                                     "it muster-sbatch writes the script above\n# to '" +
                                     (runs / "sbatch" / "dry-").string()) &&
                       Catch::Contains(".sbatch' and runs: 'sbatch' '--parsable' '--qos=high' '" +
                                       (runs / "sbatch" / "dry-").string()));
}

TEST_CASE("muster-sbatch refuses a slurm.time that is not one of Slurm's time formats",
          "[sbatch]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "job.toml", "[slurm]\ntime = \"banana\"\n");
  const auto r = muster::test::run_process({kSbatch, (dir / "job.toml").string(), "--dry-run"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK_THAT(r.err, Catch::Contains((dir / "job.toml").string() +
                                    ":2:8: slurm.time: \"banana\" is not a Slurm time limit; use "
                                    "minutes (\"90\"), MM:SS, HH:MM:SS"));
  const auto ok = muster::test::run_process(
      {kSbatch, (dir / "job.toml").string(), "slurm.time=1-00:00:00", "--dry-run"});
  CHECK(ok.exit_code == 0);
  CHECK_THAT(ok.out, Catch::Contains("#SBATCH --time=1-00:00:00\n"));
}

TEST_CASE("muster-sbatch refuses a checkpoint_lead not less than the time limit, warns above half",
          "[sbatch]") {
  muster::test::temp_dir dir;
  const auto job = (dir / "job.toml").string();
  muster::test::write_file(job, "[slurm]\ntime = \"0:05:00\"\nrequeue = true\n");
  const auto sbatch = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {kSbatch, job});
    args.push_back("--dry-run");
    return muster::test::run_process(args);
  };
  // the default lead, 300 s, on a 5-minute job: USR1 at once, and a requeue for ever
  const auto same = sbatch({});
  INFO(same.out << same.err);
  CHECK(same.exit_code == 2);
  CHECK(same.out.empty());
  CHECK_THAT(same.err,
             Catch::Contains("muster-sbatch: slurm.checkpoint_lead = 300 (the default) is not "
                             "less than the job's time limit of 300 s (slurm.time = \"0:05:00\", " +
                             job +
                             ":2:8): Slurm would send USR1 as the job starts, and with "
                             "slurm.requeue = true the job would requeue itself for ever") &&
                 Catch::Contains("set slurm.checkpoint_lead to 150 or less (e.g. 75)"));
  // a lead past the limit is not written silently either
  const auto past = sbatch({"slurm.time=0:02:00", "slurm.requeue=false"});
  CHECK(past.exit_code == 2);
  CHECK_THAT(past.err, Catch::Contains("time limit of 120 s (slurm.time = \"0:02:00\", command "
                                       "line 'slurm.time=0:02:00'): Slurm would send USR1 as the "
                                       "job starts; set slurm.checkpoint_lead to 60 or less"));
  // within Slurm's 60 s of the limit: a warning that it may come at once (tests use that)
  CHECK_THAT(sbatch({"slurm.checkpoint_lead=240"}).err,
             Catch::Contains("Slurm may send it up to 60 s early"));
  // SBATCH_TIMELIMIT, which sbatch takes over the script's --time
  const auto env = muster::test::run_process({kSbatch, job, "slurm.time=1:00:00", "--dry-run"},
                                             {{{"SBATCH_TIMELIMIT", "4"}}, {}});
  CHECK(env.exit_code == 2);
  CHECK_THAT(env.err,
             Catch::Contains("time limit of 240 s (SBATCH_TIMELIMIT=4 in the environment)"));
  // sbatch's own --time wins over slurm.time, so it is the limit then
  const auto option = sbatch({"slurm.time=1:00:00", "-t", "4"});
  CHECK(option.exit_code == 2);
  CHECK_THAT(option.err, Catch::Contains("time limit of 240 s (sbatch option -t 4)"));
  CHECK(sbatch({"--time=1:00:00"}).exit_code == 0);
  // Slurm rounds a limit up to whole minutes: 5:01 is six
  CHECK_THAT(sbatch({"slurm.time=5:01", "slurm.checkpoint_lead=200"}).err,
             Catch::Contains("more than half of the job's time limit of 360 s"));
  // more than half: a warning, with a lead that fits
  const auto half = sbatch({"slurm.time=0:08:00"});
  CHECK(half.exit_code == 0);
  CHECK_THAT(half.out, Catch::Contains("#SBATCH --signal=B:USR1@300\n"));
  CHECK_THAT(half.err, Catch::Contains("muster-sbatch: warning: slurm.checkpoint_lead = 300 (the "
                                       "default) is more than half of the job's time limit of "
                                       "480 s") &&
                           Catch::Contains("USR1 comes after 180 s of it") &&
                           Catch::Contains("set slurm.checkpoint_lead to 240 or less (e.g. 120)"));
  // half or less, no USR1, or no limit: nothing to say
  for (const auto& fine :
       std::vector<std::vector<std::string>>{{"slurm.time=0:10:00"},
                                             {"slurm.checkpoint_lead=60"},
                                             {"slurm.time=UNLIMITED"},
                                             {"slurm.time=-1"},
                                             {"slurm.checkpoint_lead=0", "slurm.time=0"},
                                             {"slurm.checkpoint_lead=0", "slurm.time=UNLIMITED"},
                                             {"--signal=B:USR1@30"}}) {
    const auto r = sbatch(fine);
    INFO(fine.front() << ": " << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, !Catch::Contains("warning: slurm.checkpoint_lead"));
  }
  // no USR1 under a limit: nothing saves at the limit, and it says so
  // with a lead the job's limit allows (5 minutes: 75 s, not the default 300)
  CHECK_THAT(sbatch({"slurm.checkpoint_lead=0"}).err,
             Catch::Contains("warning: slurm.checkpoint_lead = 0") &&
                 Catch::Contains("Set it above your slowest checkpoint save, under the limit of "
                                 "300 s (e.g. 75)"));
}

TEST_CASE("what sbatch refuses is named with the [slurm] keys and their places", "[sbatch]") {
  try {
    muster::test::slurm_cluster::program("sbatch");
  } catch (const std::runtime_error& e) {
    WARN("SKIPPED: " << e.what());
    return;
  }
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "slurm.conf",
                           "ClusterName=t\nSlurmctldHost=localhost\nNodeName=n1 CPUs=2\n"
                           "PartitionName=p Nodes=n1 Default=YES\n");
  muster::test::write_file(dir / "job.toml", "[slurm]\npartition = \"p\"\n");
  // muster-sbatch refuses a slurm.time Slurm would; an sbatch option goes to sbatch as it is
  const auto r =
      muster::test::run_process({kSbatch, (dir / "job.toml").string(), "slurm.time=1:00:00",
                                 "--time=10min", "launch.runs_dir=" + (dir / "runs").string()},
                                {{{"SLURM_CONF", (dir / "slurm.conf").string()}}, {}});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("muster-sbatch: sbatch failed: sbatch: error: Invalid --time "
                                    "specification"));
  CHECK_THAT(r.err, Catch::Contains("its #SBATCH lines come from these [slurm] keys") &&
                        Catch::Contains("  slurm.partition (set at " + (dir / "job.toml").string() +
                                        ":2:13)") &&
                        Catch::Contains("  slurm.time (set at command line 'slurm.time=1:00:00')"));
}

TEST_CASE("without a time limit, checkpoint_lead is checked against the partition's DefaultTime",
          "[sbatch][slurm]") {
  MUSTER_SKIP_WITHOUT_SLURM();
  muster::test::slurm_cluster_options options;
  options.partition = "DefaultTime=4";
  muster::test::slurm_cluster cluster(options);
  muster::test::temp_dir dir;
  const auto job = (dir / "job.toml").string();
  muster::test::write_file(job, "[slurm]\nrequeue = true\n");
  const auto sbatch = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {kSbatch, job});
    args.push_back("--dry-run");
    return muster::test::run_process(args, cluster.env());
  };
  // the default lead, 300 s, on the partition's 4 minutes: USR1 as the job starts
  const auto refused = sbatch({});
  INFO(refused.err);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err,
             Catch::Contains("is not less than the job's time limit of 240 s (partition debug's "
                             "DefaultTime=00:04:00, which Slurm gives a job without --time; "
                             "slurm.time sets one)"));
  // named as sbatch's partition, or in slurm.partition: the same
  CHECK(sbatch({"-p", "debug"}).exit_code == 2);
  CHECK(sbatch({"slurm.partition=debug"}).exit_code == 2);
  // a lead that fits, or a limit of the job's own: nothing said
  const auto fits = sbatch({"slurm.checkpoint_lead=60"});
  CHECK(fits.exit_code == 0);
  CHECK_THAT(fits.err, !Catch::Contains("checkpoint_lead"));
  CHECK(sbatch({"slurm.time=1:00:00"}).exit_code == 0);
  // a partition scontrol does not know: sbatch says so at submit; nothing to check here
  CHECK(sbatch({"-p", "nope"}).exit_code == 0);
}
