// Diagnosing a run directory and extra logs in one call: see run_diagnosis.hpp.
#include "launcher/diagnose/run_diagnosis.hpp"

#include <algorithm>
#include <string>

#include "common/error.hpp"
#include "common/job_config.hpp"
#include "common/run_dir.hpp"
#include "common/run_reader.hpp"
#include "engine/checkpoint/checkpoint_dirs.hpp"
#include "launcher/diagnose/log_reader.hpp"
#include "launcher/launch_policy.hpp"
#include "launcher/launcher_lines.hpp"
#include "launcher/plan/job_plan.hpp"
#include "launcher/status/slurm_job_state.hpp"

namespace muster::launcher::diagnose {
namespace {

namespace fs = std::filesystem;

// The rank whose log `file` is ("rank-3.log" -> 3), if its name says so.
std::optional<int> rank_of_file(const fs::path& file) {
  const auto name = file.filename().string();
  if (!name.starts_with("rank-") || !name.ends_with(".log")) return std::nullopt;
  const auto digits = name.substr(5, name.size() - 9);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos ||
      digits.size() > 6)
    return std::nullopt;
  return std::stoi(digits);
}

// The ranks' logs of a run directory, in rank order.
std::vector<fs::path> rank_logs(const fs::path& run) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run / "logs", ec))
    if (rank_of_file(entry.path())) out.push_back(entry.path());
  std::sort(out.begin(), out.end(), [](const fs::path& a, const fs::path& b) {
    return *rank_of_file(a) < *rank_of_file(b);
  });
  return out;
}

// Whether the run's ranks ran muster-train: its launchers' "program" events (none from an older
// muster: then whether they measured memory, as muster-train does).
bool ran_engine(const std::vector<store::event_record>& events, bool measured) {
  return ran_builtin_engine(events).value_or(measured);
}

// The planner's worst-stage estimate for the run's job (0 when the job file or the plan cannot
// be had: an older muster; or when it would be a guess: a program of the user's own whose job
// file left [model] at muster's default, which is not its model). muster-train's runs are
// planned with its own layout (fp32 weights under bf16), and ranks whose memory was measured on
// the CPU (`device`, step_record::mem_device) without a GPU's reserve.
std::int64_t planned_memory(const fs::path& dir, const store::run_record& run, bool engine,
                            const std::string& device) {
  try {
    const auto loaded = load_job_config(store::run_paths(dir).job_config(), {});
    if (!engine && loaded.config.model == model_section{}) return 0;
    plan::plan_request request;
    request.world = plan::world_size{static_cast<int>(run.world_size), "the run"};
    request.gpus_per_node =
        static_cast<int>(run.world_size / std::max<std::int64_t>(run.num_nodes, 1));
    if (engine) request.memory.weights = plan::weight_layout::muster_train;
    if (device == "cpu") request.memory.reserved_bytes = 0;
    return plan::make_plan(loaded.config, loaded.where, request).memory.total_bytes();
  } catch (const error&) {
    return 0;
  }
}

}  // namespace

run_diagnosis diagnose_run(const fs::path& run_dir, const std::vector<fs::path>& logs,
                           int world_size) {
  run_diagnosis out;
  std::vector<std::pair<fs::path, std::optional<int>>> files;
  if (!run_dir.empty()) {
    if (!store::run_paths(run_dir).node_dbs().empty()) {
      out.run = status::read_run_status(run_dir, store::now_ms());
      status::check_with_slurm(*out.run, std::chrono::seconds(5));
      out.events = store::run_reader(run_dir).events();
      if (world_size == 0 && out.run->run) world_size = static_cast<int>(out.run->run->world_size);
    }
    const auto ranks = rank_logs(run_dir);
    // Slurm's output of the job, linked there by muster-sbatch's script
    std::error_code ec;
    const bool slurm_out = fs::exists(run_dir / "slurm.out", ec);
    MUSTER_CHECK(out.run || !ranks.empty() || slurm_out, errc::invalid_input,
                 "diagnose: {} holds neither a run store (node-*.db), rank logs (logs/) nor "
                 "Slurm's output (slurm.out); give a run directory, or --log FILE",
                 run_dir.string());
    for (const auto& log : ranks) files.emplace_back(log, rank_of_file(log));
    if (slurm_out) files.emplace_back(run_dir / "slurm.out", std::nullopt);
    if (world_size == 0) world_size = static_cast<int>(ranks.size());
  }
  for (const auto& log : logs) files.emplace_back(log, std::nullopt);

  diagnoser d(world_size);
  // muster's own Slurm jobs run one launcher per node (srun --ntasks-per-node=1 muster launch);
  // with one task per rank, each rank's launcher records an "exec" event before it becomes it
  if (!run_dir.empty() && std::none_of(out.events.begin(), out.events.end(),
                                       [](const auto& e) { return e.kind == "exec"; }))
    d.set_srun_tasks(diagnoser::srun_tasks::launchers);
  if (out.run) {
    if (out.run->run) d.set_num_nodes(static_cast<int>(out.run->run->num_nodes));
    if (out.run->run && out.run->run->slurm_job_id) {
      std::error_code ec;
      d.set_slurm_job(*out.run->run->slurm_job_id, fs::exists(run_dir / "slurm.out", ec));
    }
    add_store_findings(d, *out.run, out.events);
    out.analysis = analyse_ranks(*out.run, 0);
    // no step measured the memory: the launchers said whether the ranks had GPUs
    if (out.analysis->peak_mem_device.empty() && ran_without_gpus(out.events).value_or(false))
      out.analysis->peak_mem_device = "cpu";
    if (out.run->run)
      out.analysis->planned_mem_bytes = planned_memory(
          run_dir, *out.run->run, ran_engine(out.events, out.analysis->peak_mem_bytes > 0),
          out.analysis->peak_mem_device);
    d.set_planned_memory(out.analysis->planned_mem_bytes);
    try {
      const auto job = load_job_config(store::run_paths(run_dir).job_config(), {});
      if (ran_engine(out.events, out.analysis->peak_mem_bytes > 0))
        out.newest_checkpoint = engine::checkpoint::newest_checkpoint(
            engine::checkpoint::checkpoint_root(job.config, run_dir));
      out.checkpoint_dir_set = !job.config.checkpoint.dir.empty();
      // the limit Slurm held, however it was set (an sbatch --time, the partition's default),
      // else the job file's
      d.set_time_limit(
          slurm_time_seconds(recorded_time_limit(out.events).value_or(job.config.slurm.time))
              .value_or(0),
          job.config.slurm.checkpoint_lead);
      if (out.newest_checkpoint && out.run->run) {
        // its trainer_state.json is the save's last file
        std::error_code ec;
        const auto saved = fs::last_write_time(*out.newest_checkpoint / "trainer_state.json", ec);
        out.checkpoint_before_run =
            !ec && std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::file_clock::to_sys(saved).time_since_epoch())
                           .count() < out.run->run->created_ms;
      }
      // muster-train read the job file: an OOM's fixes leave out what it does already
      if (ran_engine(out.events, out.analysis->peak_mem_bytes > 0)) {
        const auto& c = job.config;
        d.set_memory_settings(
            {{"parallel.sharding", c.parallel.sharding},
             {"train.recompute", c.train.recompute},
             {"train.micro_batch_size", std::to_string(c.train.micro_batch_size)},
             {"train.max_tokens_per_pack", std::to_string(c.train.max_tokens_per_pack)}});
      }
    } catch (const error&) {  // no job file (an older muster): no checkpoint to name
    }
  }
  for (const auto& [file, rank] : files) {
    const auto name = file.string();
    d.add_lines_read(read_log_lines(
        file,
        [&](std::int64_t number, std::string_view line) { d.add_line(name, number, line, rank); },
        diagnoser::keywords()));
  }
  out.result = d.finish();
  return out;
}

}  // namespace muster::launcher::diagnose
