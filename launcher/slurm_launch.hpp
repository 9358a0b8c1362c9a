// `muster launch`: one job across the nodes of a Slurm step, run by srun.
//
// One task per node (`srun --ntasks-per-node=1 muster launch job.toml`): each launcher reads
// the step (slurm_step.hpp), plans the global layout, meets the others through node 0's
// rendezvous store (rendezvous/), starts its node's ranks (launch.nproc, or one per GPU) and
// supervises them with the others: a failure anywhere stops every node, restarts are taken
// together, and every launcher exits with the first failure's code.
// One task per rank (`srun --ntasks-per-node=G`): each task is one rank (SLURM_PROCID); after
// the rendezvous has handed out MASTER_PORT it execs its worker directly and Slurm supervises.
//
// The run directory is <runs_dir>/<job name>-<job id> (array jobs: -<array job id>_<task id>),
// the same on every node and for every start of a requeued job, which resumes in it.
// Not here: the sbatch wrapper and PMIx (Slurm integration).
#pragma once

#include "launcher/local_run.hpp"

namespace muster::launcher {


// Runs this node's (or this task's) part of the job; returns the launcher's exit code. Throws
// errc::environment outside an srun step or when the rendezvous fails, errc::config /
// invalid_input for bad input (nothing started), errc::io when the run directory cannot be
// written. In per-task mode it does not return when the worker starts.
int run_slurm_launch(const job_request& request);

}  // namespace muster::launcher
