// What a finding means for people: its one-line summary and the fixes in the order to try
// them, naming the setting to change (muster's config key, and the Megatron / torchrun / Slurm
// / NCCL flag for jobs muster did not launch). One function per category family; pure.
#pragma once

#include <set>
#include <string>

#include "launcher/diagnose/diagnosis.hpp"

namespace muster::launcher::diagnose {

// What the other findings tell a finding's explanation.
struct explain_context {
  int world_size = 0;                // 0: unknown
  std::set<int> timed_out;           // the ranks that reported a collective timeout
  std::set<std::string> categories;  // of every finding
  bool torchelastic = false;         // torchrun's agent's lines were read: not muster's run
  bool muster_sbatch = false;        // the run of a job muster-sbatch submitted (its slurm.out)
  std::string slurm_job;             // the run's Slurm job id; empty: unknown
  std::int64_t time_limit_s = 0;     // the job's time limit (Slurm's, else slurm.time); 0: unknown
  int checkpoint_lead_s = -1;        // the job's slurm.checkpoint_lead; -1: unknown
  int num_nodes = 0;                 // the run's nodes; 0: unknown
};

// Fills f.summary and f.fixes from f.category and f.facts. A timeout names the ranks of the
// world that reported no timeout.
void explain(finding& f, const explain_context& context);

}  // namespace muster::launcher::diagnose
