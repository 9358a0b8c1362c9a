#!/usr/bin/env bash
# bench/compare_launch.sh BUILD_DIR: `muster run` against torchrun (Debian's python3-torch 1.13
# through ../shared/tools/torchrun, or the TORCHRUN given in the environment) on the same
# trivial worker and the same number of ranks, side by side in one run:
#   start-to-exit       4 ranks of a worker that does nothing (muster-test-worker)
#   failure-to-stopped  4 ranks; rank 1 exits 3 after 0.5 s, the others would run 30 s:
#                       the time from that exit until the launcher has exited
# and the exit code each launcher reports for that failure (the rank's is 3).
# Target (issue 4): muster at most 1/20 of torchrun's time on both; its exit code the rank's.
set -euo pipefail
build=${1:?usage: bench/compare_launch.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
muster=$build/bin/muster
worker=$build/bin/muster-test-worker
torchrun=${TORCHRUN:-$here/../../shared/tools/torchrun}
nproc=4
repeats=${REPEATS:-3}
source "$here/launch_timing.sh"
need_torchrun "$torchrun"
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT

fail_args=(--only-rank 1 --after-ms 500 --exit-code 3 --sleep-ms 30000)
m_start=$(measure "$muster" run "launch.runs_dir=$runs" "launch.nproc=$nproc" -- "$worker")
t_start=$(measure "$torchrun" --standalone --nproc_per_node=$nproc --no_python "$worker")
m_fail=$(measure "$muster" run "launch.runs_dir=$runs" "launch.nproc=$nproc" -- "$worker" "${fail_args[@]}")
t_fail=$(measure "$torchrun" --standalone --nproc_per_node=$nproc --no_python "$worker" "${fail_args[@]}")

print_table "$nproc ranks, median of $repeats" "$m_start" "$t_start" "$m_fail" "$t_fail" 500
