// muster-sbatch JOB.toml [sbatch options] [key=value ...] [--dry-run] [-- COMMAND ...]: builds
// the batch script for a job file (batch_script.hpp), shows it with --dry-run (writing nothing),
// or writes it to <runs_dir>/sbatch/, submits it with sbatch (an argv, never a shell) and prints
// the job id.
//
// Arguments after the job file: one that starts with '-' is an sbatch option (a bare word after
// it is its value: prefer --qos=high), key=value is a job-file override for muster launch, and
// everything after `--` is the worker command (default: the built-in engine).
// Exit 0 submitted (or shown), 1 sbatch failed, 2 bad input.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/config_load.hpp"
#include "common/error.hpp"
#include "common/job_config.hpp"
#include "common/run_program.hpp"
#include "launcher/engine_precheck.hpp"
#include "launcher/local_gpus.hpp"
#include "launcher/plan/job_plan.hpp"
#include "muster/version.hpp"
#include "slurm/sbatch/batch_script.hpp"
#include "slurm/sbatch/partition_time.hpp"

namespace {

namespace fs = std::filesystem;

constexpr int kExitOk = 0, kExitFailure = 1, kExitUsage = 2;

constexpr const char* kUsage =
    "usage: muster-sbatch JOB.toml [sbatch options] [key=value ...] [--dry-run] [-- COMMAND ...]\n"
    "\n"
    "Builds the batch script for a job file from its [slurm] section (nodes, gpus_per_node,\n"
    "time, partition, account, checkpoint_lead, requeue): one `muster launch` task per node,\n"
    "Slurm's output in <runs_dir>/slurm-<job id>.out, linked into the run directory.\n"
    "  --dry-run     print the script, where it would go and the sbatch command; write and\n"
    "                submit nothing\n"
    "  -h, --help    this text; --version: the version\n"
    "  --opt=value   any other option goes to sbatch (it wins over the script's #SBATCH lines)\n"
    "  key=value     a job-file override, for the script and for muster launch\n"
    "  -- COMMAND    the worker command (default: the built-in engine, muster-train)\n"
    "example: muster-sbatch etc/examples/tiny-moe.toml slurm.nodes=2 slurm.time=1:00:00\n";

struct arguments {
  fs::path job_file;
  std::vector<std::string> sbatch_options;
  std::vector<std::string> overrides;
  std::vector<std::string> command;
  bool dry_run = false;
};

arguments parse(int argc, char** argv) {
  arguments a;
  bool after_option = false;  // the previous word was an sbatch option: a bare word is its value
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") {
      a.command.assign(argv + i + 1, argv + argc);
      MUSTER_CHECK(!a.command.empty(), muster::errc::invalid_input,
                   "muster-sbatch: nothing after --; give the worker command, or leave -- out "
                   "for the built-in engine");
      break;
    }
    if (word == "--dry-run") {
      a.dry_run = true;
    } else if (word.starts_with("-")) {
      a.sbatch_options.push_back(word);
      after_option = word.find('=') == std::string::npos;
      continue;
    } else if (a.job_file.empty()) {
      a.job_file = word;
    } else if (word.find('=') != std::string::npos) {
      a.overrides.push_back(word);
    } else if (after_option) {
      a.sbatch_options.push_back(word);
    } else {
      MUSTER_THROW(muster::errc::invalid_input,
                   "muster-sbatch: {:?} is neither an sbatch option, a key=value override nor "
                   "the command after --; e.g. muster-sbatch job.toml --qos=high slurm.nodes=2",
                   word);
    }
    after_option = false;
  }
  MUSTER_CHECK(!a.job_file.empty(), muster::errc::invalid_input, "muster-sbatch: no job file; {}",
               "usage: muster-sbatch JOB.toml [...]");
  return a;
}

// The muster binary beside this one (the same install), else the first on PATH.
fs::path muster_binary() {
  std::error_code ec;
  const auto self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && fs::exists(self.parent_path() / "muster")) return self.parent_path() / "muster";
  return "muster";
}

std::string stamp() {
  const auto now = std::chrono::system_clock::now();
  const auto t = std::chrono::system_clock::to_time_t(now);
  struct tm tm {};
  localtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%d-%H%M%S", &tm);
  return text;
}

// Throws errc::invalid_input for an sbatch option that counts tasks (-n, --ntasks,
// --ntasks-per-node, ...): the script runs one muster launch a node (--ntasks-per-node=1),
// which starts the node's ranks itself, so such an option either conflicts with it or changes
// nothing muster-sbatch can honour.
void refuse_task_counts(const std::vector<std::string>& sbatch_options) {
  for (const auto& option : sbatch_options) {
    const bool short_n = option == "-n" || (option.size() > 2 && option.starts_with("-n") &&
                                            std::isdigit(option[2]) != 0);
    MUSTER_CHECK(!short_n && !option.starts_with("--ntasks"), muster::errc::invalid_input,
                 "sbatch option {}: muster-sbatch's script runs one muster launch a node "
                 "(--ntasks-per-node=1), which starts that node's ranks itself: launch.nproc of "
                 "them (default one per GPU). Give the nodes (--nodes N or slurm.nodes) and "
                 "launch.nproc instead; for one Slurm task per rank, write a script of your own "
                 "(docs/slurm.md, \"One task per rank\")",
                 option);
    // torchrun's node count, which sbatch has not: its own is --nodes
    MUSTER_CHECK(!option.starts_with("--nnodes"), muster::errc::invalid_input,
                 "sbatch option {}: torchrun's name; sbatch's is --nodes N (or set slurm.nodes "
                 "in the job file)",
                 option);
  }
}

// The job's plan on the world it will get, where the job file says it (launch.nproc, or
// slurm.gpus_per_node ranks a node, over slurm.nodes): a layout muster launch would refuse fails
// here, not after the queue. Throws errc::config as muster plan does.
void check_plan(const muster::loaded_job_config& loaded,
                const std::vector<std::string>& sbatch_options) {
  const auto& config = loaded.config;
  if (config.launch.nproc <= 0 && config.slurm.gpus_per_node <= 0) return;  // one a GPU: unknown
  // an sbatch option wins over the script's #SBATCH lines: the world is sbatch's then
  for (const auto& option : sbatch_options)
    for (const char* changes : {"-N", "--nodes", "-G", "--gpus"})
      if (option.starts_with(changes)) {
        fmt::print(stderr,
                   "muster-sbatch: note: {} sets the world, so the layout is checked when the "
                   "job starts, not here\n",
                   option);
        return;
      }
  const int local = muster::launcher::local_ranks(config.launch.nproc, config.slurm.gpus_per_node);
  namespace plan = muster::launcher::plan;
  plan::plan_request request;
  request.world = plan::world_size{
      config.slurm.nodes * local,
      fmt::format("slurm.nodes = {} x {} = {}", config.slurm.nodes,
                  config.launch.nproc > 0 ? "launch.nproc" : "slurm.gpus_per_node", local)};
  request.gpus_per_node = local;
  plan::make_plan(config, loaded.where, request);
}

// Where `key` was set, or "the default".
std::string place_or_default(const muster::loaded_job_config& loaded, const std::string& key) {
  return loaded.where.count(key) ? muster::config::place_of(loaded.where, key) : "the default";
}

// The value of sbatch option `name` (long, "--output") or `letter` ("-o") among the options
// given, and the option as given ("-t 30", "--time=30"), the last one winning as sbatch takes
// it; nothing when none.
std::optional<std::pair<std::string, std::string>> option_given(
    const std::vector<std::string>& options, std::string_view name, std::string_view letter) {
  std::optional<std::pair<std::string, std::string>> found;  // (value, as given)
  for (std::size_t i = 0; i < options.size(); ++i) {
    const auto& o = options[i];
    if (o.starts_with(std::string(name) + "=")) {
      found.emplace(o.substr(name.size() + 1), o);
    } else if ((o == name || o == letter) && i + 1 < options.size()) {
      found.emplace(options[i + 1], o + " " + options[i + 1]);
      ++i;
    } else if (o.starts_with(letter) && o.size() > letter.size() && !o.starts_with("--")) {
      found.emplace(o.substr(letter.size()), o);
    }
  }
  return found;
}

// The value of sbatch option `name` or `letter` (option_given), or "" when none.
std::string option_value(const std::vector<std::string>& options, std::string_view name,
                         std::string_view letter) {
  const auto given = option_given(options, name, letter);
  return given ? given->first : "";
}

// The value of sbatch option `name`/`letter`, else of its input environment variable `env`
// (which sbatch takes between its options and the script's #SBATCH lines): the value, and what
// set it for messages ("sbatch option -t 30", "SBATCH_TIMELIMIT=30 in the environment").
std::optional<std::pair<std::string, std::string>> sbatch_setting(
    const std::vector<std::string>& options, std::string_view name, std::string_view letter,
    const char* env) {
  if (auto given = option_given(options, name, letter))
    return std::pair{given->first, "sbatch option " + given->second};
  if (const char* value = std::getenv(env); value && *value)
    return std::pair{std::string(value), fmt::format("{}={} in the environment", env, value)};
  return std::nullopt;
}

// The job's time limit: what sets it, for messages ("sbatch option -t 30", or "slurm.time =
// \"0:30:00\", <its place>"), and its text. An sbatch option (--time=T, --time T, -t T, -tT;
// the last wins, as in sbatch) wins over SBATCH_TIMELIMIT, which wins over slurm.time; with
// none of them, the partition's DefaultTime or MaxTime, as scontrol says it (the partition
// given as sbatch's, then slurm.partition, else the default one). Nothing when nothing tells.
std::optional<std::pair<std::string, std::string>> time_limit(
    const muster::loaded_job_config& loaded, const std::vector<std::string>& sbatch_options) {
  if (auto set = sbatch_setting(sbatch_options, "--time", "-t", "SBATCH_TIMELIMIT"))
    return std::pair{set->second, set->first};
  const auto& slurm = loaded.config.slurm;
  if (!slurm.time.empty())
    return std::pair{
        fmt::format("slurm.time = \"{}\", {}", slurm.time, place_or_default(loaded, "slurm.time")),
        slurm.time};
  const auto partition = sbatch_setting(sbatch_options, "--partition", "-p", "SBATCH_PARTITION");
  const auto limit =
      muster::slurm::ask_partition_time_limit(partition ? partition->first : slurm.partition);
  if (!limit) return std::nullopt;
  return std::pair{fmt::format("partition {}'s {}={}, which Slurm gives a job without --time; "
                               "slurm.time sets one",
                               limit->partition, limit->key, limit->value),
                   limit->value};
}

// slurm.checkpoint_lead against the time limit: Slurm sends USR1 that long before the limit. A
// lead not less than the limit sends it as the job starts (and with slurm.requeue the job
// requeues itself for ever, no step done): throws errc::config. More than half: a warning.
// `limit`: time_limit's, or nothing (none known, or sbatch's own --signal wins over the lead).
void check_lead(const muster::loaded_job_config& loaded,
                const std::optional<std::pair<std::string, std::string>>& limit) {
  const auto& s = loaded.config.slurm;
  if (s.checkpoint_lead == 0 || !limit) return;
  auto seconds = muster::slurm_time_seconds(limit->second);
  if (!seconds || *seconds == 0) return;  // sbatch refuses it, or no limit
  *seconds = (*seconds + 59) / 60 * 60;   // Slurm counts a limit in whole minutes, rounded up
  const auto lead = fmt::format("slurm.checkpoint_lead = {} ({})", s.checkpoint_lead,
                                place_or_default(loaded, "slurm.checkpoint_lead"));
  const auto fix = fmt::format(
      "set slurm.checkpoint_lead to {} or less (e.g. {}), above your "
      "slowest checkpoint save",
      *seconds / 2, muster::suggested_checkpoint_lead(*seconds));
  MUSTER_CHECK(s.checkpoint_lead < *seconds, muster::errc::config,
               "muster-sbatch: {} is not less than the job's time limit of {} s ({}): Slurm "
               "would send USR1 as the job starts{}; {}, or 0 for no USR1, or give the job more "
               "time",
               lead, *seconds, limit->first,
               s.requeue ? ", and with slurm.requeue = true the job would requeue itself for "
                           "ever without a step done"
                         : "",
               fix);
  if (s.checkpoint_lead * 2 > *seconds)
    fmt::print(stderr,
               "muster-sbatch: warning: {} is more than half of the job's time limit of {} s "
               "({}): USR1 comes after {} s of it (Slurm may send it up to 60 s early), and the "
               "job stops there{}; {}\n",
               lead, *seconds, limit->first, *seconds - s.checkpoint_lead,
               s.requeue ? " and requeues" : "", fix);
}

// The [slurm] keys the job set, each with its value's place: what sbatch's complaint is about.
std::string slurm_keys(const muster::loaded_job_config& loaded) {
  std::string out;
  for (const auto& [key, place] : loaded.where)
    if (key.starts_with("slurm."))
      out += fmt::format("{}  {} (set at {})", out.empty() ? "" : "\n", key, place);
  return out;
}

// The user's --output, absolute as sbatch takes it (from --chdir, else from here).
std::string user_output(const std::vector<std::string>& options) {
  const auto output = option_value(options, "--output", "-o");
  if (output.empty() || output.starts_with("/")) return output;
  const auto chdir = option_value(options, "--chdir", "-D");
  return (chdir.empty() ? fs::current_path() : fs::absolute(chdir)) / output;
}

// The user's --output pattern with the job's id in it (what `ls` finds), other replacements
// left as Slurm writes them.
std::string output_named(std::string pattern, const std::string& id) {
  for (auto at = pattern.find("%j"); at != std::string::npos; at = pattern.find("%j", at))
    pattern.replace(at, 2, id);
  return pattern;
}

int submit(const arguments& a) {
  const auto loaded = muster::load_job_config(a.job_file, a.overrides);
  const auto& config = loaded.config;
  refuse_task_counts(a.sbatch_options);
  check_plan(loaded, a.sbatch_options);
  // sbatch's own --signal wins over slurm.checkpoint_lead: nothing to check it against then
  const bool own_signal =
      std::any_of(a.sbatch_options.begin(), a.sbatch_options.end(),
                  [](const std::string& o) { return o.starts_with("--signal"); });
  const auto limit = own_signal ? std::nullopt : time_limit(loaded, a.sbatch_options);
  check_lead(loaded, limit);
  // muster-train's data and checkpoint.load, as this host sees them: a job that will fail at its
  // start is said now, not after its wait in the queue (a warning: its nodes may see files this
  // host does not)
  try {
    muster::launcher::check_engine_job(
        config, a.command.empty() ? std::vector<std::string>{"muster-train"} : a.command);
  } catch (const muster::error& e) {
    if (e.category() != muster::errc::invalid_input) throw;
    fmt::print(stderr,
               "muster-sbatch: warning: {} (seen from this host; the job's nodes check again at "
               "its start, and it fails there unless they see otherwise)\n",
               e.what());
  }
  if (const auto limit_s = limit ? muster::slurm_time_seconds(limit->second).value_or(0) : 0;
      limit_s > 0 && config.slurm.checkpoint_lead == 0)
    fmt::print(stderr,
               "muster-sbatch: warning: slurm.checkpoint_lead = 0 ({}): nothing saves at the "
               "time limit (srun turns Slurm's SIGTERM into SIGKILL for its tasks); only the "
               "checkpoints of checkpoint.interval will be there. Set it above your slowest "
               "checkpoint save, under the limit of {} s (e.g. {})\n",
               muster::config::place_of(loaded.where, "slurm.checkpoint_lead"), limit_s,
               muster::suggested_checkpoint_lead(limit_s));
  muster::slurm::batch_request request{fs::absolute(a.job_file),
                                       a.overrides,
                                       muster::made_absolute_overrides(loaded),
                                       a.command,
                                       fs::absolute(config.launch.runs_dir).lexically_normal(),
                                       muster_binary(),
                                       user_output(a.sbatch_options),
                                       option_value(a.sbatch_options, "--job-name", "-J"),
                                       option_value(a.sbatch_options, "--cpus-per-task", "-c")};
  const auto script = muster::slurm::batch_script(config, request);
  const auto stamped = stamp();
  std::vector<std::string> sbatch = {"sbatch", "--parsable"};
  sbatch.insert(sbatch.end(), a.sbatch_options.begin(), a.sbatch_options.end());
  if (a.dry_run) {
    fmt::print("{}", script);
    std::string words;
    for (const auto& w : sbatch)
      words += (words.empty() ? "" : " ") + muster::slurm::shell_quote(w);
    // the name write_script would take first (it writes nothing here)
    const auto file = muster::slurm::shell_quote(
        (request.runs_dir / "sbatch" / fmt::format("{}-{}.sbatch", config.job.name, stamped))
            .string());
    fmt::print(
        "# --dry-run: nothing written, nothing submitted. Without it muster-sbatch writes "
        "the script above\n# to {} and runs: {} {}\n",
        file, words, file);
    return kExitOk;
  }
  const auto file = muster::slurm::write_script(request.runs_dir, config.job.name, stamped, script);
  sbatch.push_back(file.string());
  const auto r = muster::run_program(sbatch, std::chrono::seconds(60));
  if (!r.ok()) {
    fmt::print(stderr, "muster-sbatch: sbatch failed{}: {}\nmuster-sbatch: the script is {}\n",
               r.timed_out ? " (no answer in 60 s)" : "", r.started ? r.output : r.why_not,
               file.string());
    if (const auto keys = slurm_keys(loaded); !keys.empty())
      fmt::print(stderr,
                 "muster-sbatch: its #SBATCH lines come from these [slurm] keys (sinfo lists "
                 "the partitions, their time limits and GRES):\n{}\n",
                 keys);
    return kExitFailure;
  }
  const auto id = r.output.substr(0, r.output.find_first_of(";\n"));
  fmt::print("{}\n", id);
  const auto runs = request.runs_dir.string();
  // an array's tasks each have a job id of their own, and a run directory <id>_<task id>
  const bool array = std::any_of(
      a.sbatch_options.begin(), a.sbatch_options.end(),
      [](const std::string& o) { return o.starts_with("--array") || o.starts_with("-a"); });
  if (array)
    fmt::print(stderr,
               "muster-sbatch: submitted array job {} ({}); run directories {}/{}-{}_<task id>, "
               "each task's Slurm output {}/slurm-<the task's own job id>.out, linked into its "
               "run directory as slurm.out; follow them with: muster status --runs-dir {} {}\n",
               id, file.string(), runs, config.job.name, id, runs, runs, id);
  else
    fmt::print(stderr,
               "muster-sbatch: submitted job {} ({}); run directory {}/{}-{}, Slurm output "
               "{}; follow it with: muster status --runs-dir {} {}\n",
               id, file.string(), runs, config.job.name, id,
               request.output.empty() ? fmt::format("{}/slurm-{}.out", runs, id)
                                      : output_named(request.output, id),
               runs, id);
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc && std::string(argv[i]) != "--"; ++i) {
    const std::string word = argv[i];
    if (word == "-h" || word == "--help") {
      fmt::print("{}", kUsage);
      return kExitOk;
    }
    if (word == "--version") {
      fmt::print("muster-sbatch {} (git {})\n", muster::kVersion, muster::kGitCommit);
      return kExitOk;
    }
  }
  try {
    return submit(parse(argc, argv));
  } catch (const muster::error& e) {
    fmt::print(stderr, "{}\n", e.what());
    const bool bad_input =
        e.category() == muster::errc::invalid_input || e.category() == muster::errc::config;
    return bad_input ? kExitUsage : kExitFailure;
  }
}
