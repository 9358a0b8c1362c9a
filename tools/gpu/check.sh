#!/usr/bin/env bash
# tools/gpu/check.sh [LOG_DIR]: every GPU check of the engine in one command, sized for a short
# lease on a GPU machine (about 8 minutes on an H100 with 16 cores), run from the repository
# root after tools/gpu/fetch-deps.sh here (carry .gpu-deps):
#   1. build      tools/gpu/build.sh into build-gpu/ (the engine, its tests and benchmarks)
#   2. tests      ctest -L gpu: every CUDA kernel against its CPU reference, NCCL on the GPU,
#                 20 steps on the GPU against the CPU
#   3. kernels    build-gpu/bench/gpu_kernels_bench: bandwidth and FLOP/s against peak and
#                 against the PyTorch ops they replace
#   4. train      bench/compare_train_gpu.sh: muster-train against PyTorch eager (and
#                 torch.compile within COMPILE_TIMEOUT, default 120 s) on bench/gpu/moe-1b.toml
#   5. profile    muster-train on the same job with steps 5-6 under PyTorch's profiler: the
#                 busiest kernels and ops (profile-rank-0.txt), its Chrome trace
#                 (trace-rank-0.json.gz), and the same steps of the PyTorch reference
#                 (profile-reference.txt; PROFILE_REFERENCE=0 leaves it out)
#   6. methods    where EXPERT_GEMMS names train.expert_gemm values (e.g. "split grouped"):
#                 muster-train's median tokens/s on the same job with each, 12 steps a run
# Each step's output goes to LOG_DIR/<step>.log (default: $OUT where set, else gpu-check/), and
# a summary of what passed to LOG_DIR/summary.txt and stdout. A failed step does not stop the
# ones after it that can run; the exit code is 1 when any failed.
# Environment: PYTHON, STEPS (training steps, default 20), COMPILE_TIMEOUT (0: no torch.compile
# run), EXPERT_GEMMS (step 6), TESTS_TIMEOUT (seconds for all the GPU tests, default 600),
# KERNELS_TIMEOUT (seconds for step 3, default 180: a kernel stuck past its own watchdog then
# leaves the lease's time to the steps after it), CMAKE_ARGS (to the configure step, e.g.
# -DMUSTER_WERROR=OFF), TARGETS (build only these), SKIP (step names to leave out,
# e.g. "build" when build-gpu/ is already built).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
logs=${1:-${OUT:-$root/gpu-check}}
mkdir -p "$logs"
build=$root/build-gpu
failed=0
summary() { echo "$1" | tee -a "$logs/summary.txt"; }

step() {  # step NAME COMMAND...: runs it unless SKIP names it; its output to NAME.log
  local name=$1
  shift
  if [[ " ${SKIP:-} " == *" $name "* ]]; then
    summary "$name: skipped (SKIP)"
    return 0
  fi
  local began=$SECONDS rc=0
  "$@" > "$logs/$name.log" 2>&1 || rc=$?
  if [[ $rc == 0 ]]; then
    summary "$name: ok ($((SECONDS - began)) s)"
  else
    summary "$name: FAILED (exit $rc, $((SECONDS - began)) s): last lines of $name.log:"
    tail -n 15 "$logs/$name.log" | sed 's/^/    /' | tee -a "$logs/summary.txt"
    failed=1
  fi
  return $rc
}

# shellcheck disable=SC2317  # called through step
methods() {  # muster-train's median tokens/s over steps 5.. with each train.expert_gemm named
  local m
  for m in $EXPERT_GEMMS; do
    MUSTER_RUN_DIR=$(mktemp -d) "$build/bin/muster-train" "$root/bench/gpu/moe-1b.toml" \
      train.steps=12 "train.expert_gemm=$m" 2>&1 | grep -o '| [0-9]* tok/s' | awk '{print $2}' \
      | tail -n +5 | sort -n | awk -v m="$m" '{v[NR] = $1} END {
          if (NR == 0) { print "train.expert_gemm=" m ": no steps"; exit 1 }
          print "train.expert_gemm=" m ": " v[int((NR + 1) / 2)] " tok/s (median of " NR " steps)" }' \
      || return
  done
}

# shellcheck disable=SC2317  # called through step
profile() {  # muster-train with steps 5 and 6 profiled, its table kept
  local work
  work=$(mktemp -d)
  MUSTER_RUN_DIR=$work "$build/bin/muster-train" "$root/bench/gpu/moe-1b.toml" train.steps=7 \
    train.profile_step_start=5 train.profile_step_end=6 || return
  cp "$work/profile/rank-0.txt" "$logs/profile-rank-0.txt"
  # the Chrome trace (Kineto), compressed: https://ui.perfetto.dev opens it as it is
  if [[ -e $work/profile/rank-0.json ]]; then
    gzip -c "$work/profile/rank-0.json" > "$logs/trace-rank-0.json.gz"
  fi
  rm -rf "$work"
  [[ ${PROFILE_REFERENCE:-1} == 1 ]] || return 0
  # the same steps of the PyTorch reference, for the op counts and times side by side
  "${PYTHON:-python3}" "$root/bench/reference/moe_reference.py" --layers 16 --hidden 1024 \
    --ffn 4096 --heads 16 --kv_heads 8 --experts 32 --moe_ffn 640 --topk 4 --first_dense 1 \
    --seq 2048 --micro 4 --steps 7 --device cuda --precision bf16 \
    --profile "$logs/profile-reference.txt"
}

: > "$logs/summary.txt"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version \
  --format=csv,noheader | sed 's/^/GPU: /' | tee -a "$logs/summary.txt"
# a failed build goes on: the steps whose programs were built still run (KEEP_GOING)
# shellcheck disable=SC2086  # CMAKE_ARGS is a list of arguments
step build env KEEP_GOING=1 "$root/tools/gpu/build.sh" "$build" ${CMAKE_ARGS:-}
# shellcheck disable=SC1091  # written by build.sh before it builds
[[ -e $build/gpu-env.sh ]] && . "$build/gpu-env.sh"
step tests timeout "${TESTS_TIMEOUT:-600}" ctest --test-dir "$build" -L gpu --output-on-failure
step kernels timeout -k 10 "${KERNELS_TIMEOUT:-180}" "$build/bench/gpu_kernels_bench"
step train env STEPS="${STEPS:-20}" COMPILE_TIMEOUT="${COMPILE_TIMEOUT:-120}" \
  "$root/bench/compare_train_gpu.sh" "$build"
step profile profile
[[ -n ${EXPERT_GEMMS:-} ]] && step methods methods
grep -h -A4 '^GPU: ' "$logs/train.log" 2> /dev/null | tee -a "$logs/summary.txt"
# the figures the targets are read from: the router's bandwidth, the grouped GEMM's share of
# dense (and its host time a call), the wgrad's dy^T, the norms, and how busy the profiled
# steps kept the GPU
grep -h -E '^router|^grouped gemm|^dy\^T|^rms_norm' "$logs/kernels.log" 2> /dev/null | tee -a "$logs/summary.txt"
grep -h 'GPU busy' "$logs/profile-rank-0.txt" 2> /dev/null | tee -a "$logs/summary.txt"
[[ -e $logs/methods.log ]] && tee -a "$logs/summary.txt" < "$logs/methods.log"
exit $failed
