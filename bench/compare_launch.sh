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
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null || [[ ! -x $torchrun ]]; then
  echo "compare_launch: SKIPPED: torchrun needs Debian's python3-torch (make deps) and $torchrun"
  exit 0
fi
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT

now_ms() { date +%s%3N; }
# Runs "$@" quietly; prints "<ms> <exit code>".
timed() {
  local start end rc=0
  start=$(now_ms)
  "$@" >/dev/null 2>&1 || rc=$?
  end=$(now_ms)
  echo "$((end - start)) $rc"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

measure() {  # measure NAME CMD...: median ms over $repeats runs, and the last exit code
  local times=() result rc
  for ((i = 0; i < repeats; i++)); do
    result=$(timed "$@")
    times+=("${result% *}")
    rc=${result#* }
  done
  echo "$(printf '%s\n' "${times[@]}" | median) $rc"
}

fail_args=(--only-rank 1 --after-ms 500 --exit-code 3 --sleep-ms 30000)
m_start=$(measure "$muster" run "launch.runs_dir=$runs" "launch.nproc=$nproc" -- "$worker")
t_start=$(measure "$torchrun" --standalone --nproc_per_node=$nproc --no_python "$worker")
m_fail=$(measure "$muster" run "launch.runs_dir=$runs" "launch.nproc=$nproc" -- "$worker" "${fail_args[@]}")
t_fail=$(measure "$torchrun" --standalone --nproc_per_node=$nproc --no_python "$worker" "${fail_args[@]}")

ms() { echo "${1% *}"; }
code() { echo "${1#* }"; }
m_stop=$(( $(ms "$m_fail") - 500 )); t_stop=$(( $(ms "$t_fail") - 500 ))
printf '%-34s %10s %10s %12s\n' "$nproc ranks, median of $repeats" muster torchrun "muster/torch"
printf '%-34s %8s ms %8s ms %12.4f\n' "start to exit (trivial worker)" "$(ms "$m_start")" "$(ms "$t_start")" \
  "$(awk -v a="$(ms "$m_start")" -v b="$(ms "$t_start")" 'BEGIN {print a / b}')"
printf '%-34s %8s ms %8s ms %12.4f\n' "failure to all stopped" "$m_stop" "$t_stop" \
  "$(awk -v a="$m_stop" -v b="$t_stop" 'BEGIN {print (a < 1 ? 1 : a) / b}')"
printf '%-34s %10s %10s\n' "exit code (the rank's is 3)" "$(code "$m_fail")" "$(code "$t_fail")"
