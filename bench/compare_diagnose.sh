#!/usr/bin/env bash
# bench/compare_diagnose.sh BUILD_DIR: `muster diagnose --log` over a large training log against
# `grep -c -E` of the same patterns, side by side in one run: throughput (MB/s) of each, their
# ratio, and the peak memory (max RSS) of each.
# The log (SIZE_MB, default 1024) is a training log's mix: step lines, NCCL INFO lines, warnings,
# a traceback-free decoy or two, and near its end one NCCL timeout and one CUDA OOM, so both
# tools read every byte and find something. Each is run ROUNDS times (default 2); the best time
# counts. Target (issue 7): diagnose at least half of grep's speed, memory bounded (not growing
# with the log).
set -euo pipefail
build=${1:?usage: bench/compare_diagnose.sh BUILD_DIR}
size_mb=${SIZE_MB:-1024}
rounds=${ROUNDS:-2}
muster=$build/bin/muster
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# grep's patterns are diagnose's own keywords (every line diagnose reads holds one), as
# extended regular expressions
"$muster" diagnose --keywords | sed 's/[][()\\.*+?{}|^$]/\\&/g' > "$work/patterns"

# one MiB of ordinary lines, repeated
awk 'BEGIN {
  srand(7);
  for (i = 0; bytes < 1048576; i++) {
    r = i % 10;
    if (r < 6)
      line = sprintf("[rank%d]: step %d | loss %.4f | lr %.3e | tokens/s %d | step time %.3f s", i % 8, i, 2 + rand(), 1e-4 * rand(), 50000 + int(rand() * 1000), 1.2 + rand() / 10);
    else if (r < 8)
      line = sprintf("gpu-a%02d:%d:%d [%d] NCCL INFO Channel %02d/0 : %d[%d] -> %d[%d] via P2P/CUMEM/read", i % 16, 4000 + i % 100, 4100 + i % 7, i % 8, i % 32, i % 8, i % 8, (i + 1) % 8, (i + 1) % 8);
    else if (r < 9)
      line = sprintf("[rank%d]:[W%d ProcessGroupNCCL.cpp:1234] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS is the default now", i % 8, i);
    else
      line = sprintf("training: 0 errors, %d samples, out of memory budget %d%%", i, 80 + i % 10);
    print line;
    bytes += length(line) + 1;
  }
}' > "$work/block.log"
for ((i = 0; i < size_mb; i++)); do cat "$work/block.log"; done > "$work/big.log"
cat >> "$work/big.log" <<'LOG'
[rank3]:[E1122 03:12:44.123 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1042, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.
[rank5]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 5 has a total capacity of 79.15 GiB of which 1.23 GiB is free. Of the allocated memory 75.01 GiB is allocated by PyTorch, and 1.27 GiB is reserved by PyTorch but unallocated.
LOG
bytes=$(stat -c %s "$work/big.log")
mb=$(awk -v b="$bytes" 'BEGIN { printf "%.0f", b / 1048576 }')

# best wall time (s) and max RSS (KiB) of ROUNDS runs of a command
measure() {
  local best="" rss=0 t m
  for ((r = 0; r < rounds; r++)); do
    /usr/bin/time -f '%e %M' -o "$work/time" "$@" > "$work/out" 2>/dev/null || true
    read -r t m < <(tail -n 1 "$work/time")  # after "Command exited with non-zero status"
    if [[ -z $best ]] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$t; fi
    ((m > rss)) && rss=$m
  done
  echo "$best $rss"
}

read -r grep_s grep_kib < <(measure grep -c -E -f "$work/patterns" "$work/big.log")
read -r diag_s diag_kib < <(measure "$muster" diagnose --log "$work/big.log")
grep -q '\[cuda_oom\]' "$work/out" || { echo "compare_diagnose: diagnose did not find the OOM" >&2; exit 1; }
awk -v mb="$mb" -v g="$grep_s" -v d="$diag_s" -v gk="$grep_kib" -v dk="$diag_kib" 'BEGIN {
  gs = (g > 0 ? mb / g : 0); ds = (d > 0 ? mb / d : 0);
  printf "diagnose over a %d MiB log: %.2f s (%.0f MiB/s), max RSS %.1f MiB\n", mb, d, ds, dk / 1024;
  printf "grep -c -E, same patterns:  %.2f s (%.0f MiB/s), max RSS %.1f MiB\n", g, gs, gk / 1024;
  ratio = (gs > 0 ? ds / gs : 0);
  printf "diagnose / grep speed: %.2fx (target >= 0.5x: %s)\n", ratio, (ratio >= 0.5 ? "met" : "NOT met");
}'
