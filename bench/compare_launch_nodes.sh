#!/usr/bin/env bash
# bench/compare_launch_nodes.sh BUILD_DIR: two nodes of two ranks each, on loopback, side by
# side in one run:
#   muster    two `muster launch` processes, each with the environment srun gives a task of a
#             2-node step (one task per node), meeting through node 0's rendezvous store;
#   torchrun  two torchrun agents (Debian's python3-torch 1.13 through ../shared/tools/torchrun)
#             with the c10d rendezvous on 127.0.0.1, as on two nodes.
# Figures as in compare_launch.sh: start to exit of a worker that does nothing, and failure to
# all stopped when global rank 3 (on the second node) exits 3 after 0.5 s while the others would
# run 30 s. Each figure ends when both launchers have exited; the exit code is the higher of the
# two, as srun reports it.
set -euo pipefail
build=${1:?usage: bench/compare_launch_nodes.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
muster=$build/bin/muster
worker=$build/bin/muster-test-worker
torchrun=${TORCHRUN:-$here/../../shared/tools/torchrun}
repeats=${REPEATS:-3}
source "$here/launch_timing.sh"
need_torchrun "$torchrun"
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT

job=$((700000 + $$ % 10000 * 10))
port=$((29700 + $$ % 200))

# Both nodes of one step; the exit code is the higher one.
muster_step() {
  job=$((job + 1))
  local pids=() rc=0 one
  for node in 0 1; do
    env SLURM_JOB_ID=$job SLURM_STEP_ID=0 SLURM_JOB_NODELIST='bench[1-2]' \
      SLURM_STEP_NODELIST='bench[1-2]' SLURM_NNODES=2 SLURM_STEP_NUM_NODES=2 SLURM_NTASKS=2 \
      SLURM_STEP_NUM_TASKS=2 SLURM_TASKS_PER_NODE='1(x2)' SLURM_STEP_TASKS_PER_NODE='1(x2)' \
      SLURM_PROCID=$node SLURM_LOCALID=0 SLURM_NODEID=$node SLURMD_NODENAME=bench$((node + 1)) \
      "$muster" launch "launch.runs_dir=$runs" launch.nproc=2 launch.master_addr=127.0.0.1 \
      -- "$worker" "$@" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do one=0; wait "$p" || one=$?; ((one > rc)) && rc=$one; done
  return "$rc"
}

torch_nodes() {
  port=$((port + 1))
  local pids=() rc=0 one
  for node in 0 1; do
    "$torchrun" --nnodes=2 --nproc_per_node=2 --rdzv_backend=c10d \
      "--rdzv_endpoint=127.0.0.1:$port" "--rdzv_id=bench$port" --no_python "$worker" "$@" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do one=0; wait "$p" || one=$?; ((one > rc)) && rc=$one; done
  return "$rc"
}

fail_args=(--only-rank 3 --after-ms 500 --exit-code 3 --sleep-ms 30000)
m_start=$(measure muster_step)
t_start=$(measure torch_nodes)
m_fail=$(measure muster_step "${fail_args[@]}")
t_fail=$(measure torch_nodes "${fail_args[@]}")
print_table "2 nodes x 2 ranks, median of $repeats" "$m_start" "$t_start" "$m_fail" "$t_fail" 500
