// Diagnosing a run directory and extra logs in one call: the store (run_findings.hpp), the
// ranks' logs (logs/rank-N.log), Slurm's output when muster-sbatch linked it there (slurm.out)
// and any other log, streamed; what `muster diagnose` prints and `muster report` draws.
#pragma once

#include <filesystem>
#include <optional>
#include <vector>

#include "common/run_store_records.hpp"
#include "launcher/diagnose/diagnosis.hpp"
#include "launcher/diagnose/run_findings.hpp"
#include "launcher/status/run_status.hpp"

namespace muster::launcher::diagnose {

struct run_diagnosis {
  diagnosis result;
  std::optional<status::run_status> run;    // none: no run, or a directory without a store
  std::vector<store::event_record> events;  // the run's events, by time
  std::optional<rank_analysis> analysis;    // with the store
  // the newest checkpoint muster-train saved for the run (under its job's checkpoint.dir, else
  // <run directory>/checkpoints), where a stopped or failed run goes on from
  // (only for a run of muster-train: another program's checkpoints are its own)
  std::optional<std::filesystem::path> newest_checkpoint;
  bool checkpoint_dir_set = false;  // the job set checkpoint.dir (else the run directory's)
  bool checkpoint_before_run = false;  // newest_checkpoint was saved before the run started
};

// `run_dir` may be empty (only `logs`). `world_size` 0: the run's own, else the number of rank
// logs. Throws errc::invalid_input for a directory with neither a store nor rank logs, or a log
// that cannot be read; errc::store / errc::io when the store cannot be read.
run_diagnosis diagnose_run(const std::filesystem::path& run_dir,
                           const std::vector<std::filesystem::path>& logs, int world_size);

}  // namespace muster::launcher::diagnose
