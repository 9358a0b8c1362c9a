#!/usr/bin/env bash
# bench/compare_train.sh BUILD_DIR: muster-train against the same model in eager PyTorch
# (bench/reference/moe_reference.py on Debian's python3-torch 1.13), side by side in one run:
# the same sizes (4 layers, hidden 256, 8 experts top-2, rows of 256 bytes of the license
# texts, 4 rows a step per rank), fp32 on the CPU, THREADS threads per rank (default 1):
#   1 rank:  muster-train alone against the script;
#   2 ranks: `muster run` (data parallel, no_shard, Gloo) against the script data parallel over
#            Gloo (one flat all_reduce of the gradients a step), both on loopback.
# Each is run ROUNDS times (default 2) alternating muster and Python; reported: the best of the
# rounds' medians of tokens/s per rank over steps 4..STEPS, and their ratio. Also what
# reporting each step to the launcher (heartbeat, run-store line) costs muster's step.
# Target (issue 5): muster at least 1.3x the Python reference; reporting under 1% of a step.
set -euo pipefail
build=${1:?usage: bench/compare_train.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
threads=${THREADS:-1}
rounds=${ROUNDS:-2}
steps=${STEPS:-20}
python=/usr/bin/python3
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "compare_train: $python cannot import torch (apt install python3-torch); skipped"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/job.toml" <<TOML
[model]
num_layers = 4
hidden_size = 256
ffn_hidden_size = 1024
num_attention_heads = 8
num_query_groups = 4
vocab_size = 256
num_experts = 8
moe_ffn_hidden_size = 256
moe_router_topk = 2
moe_first_dense_layers = 1
[train]
micro_batch_size = 4
seq_length = 256
max_tokens_per_pack = 256
steps = $steps
precision = "fp32"
[checkpoint]
interval = -1
TOML

# The median of the numbers on stdin.
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# The larger of two numbers.
best() { awk -v a="$1" -v b="$2" 'BEGIN {print (a > b) ? a : b}'; }
# Tokens/s of rank 0's steps 4.. in a muster-train log.
muster_tps() { grep -o '| [0-9]* tok/s' "$1" | awk '{print $2}' | tail -n +4 | median; }
python_tps() { awk '{print $4}' "$1" | tail -n +4 | median; }

# The same threads for both, BLAS's included: OpenBLAS reads OMP_NUM_THREADS (and would use every
# core otherwise, whatever torch.set_num_threads says).
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
one_muster=0 one_python=0 two_muster=0 two_python=0
for ((round = 1; round <= rounds; ++round)); do
  "$build/bin/muster-train" "$work/job.toml" > "$work/muster.log" 2>&1
  one_muster=$(best "$one_muster" "$(muster_tps "$work/muster.log")")
  "$python" "$here/reference/moe_reference.py" --threads "$threads" --steps "$steps" > "$work/python.log"
  one_python=$(best "$one_python" "$(python_tps "$work/python.log")")

  rm -rf "$work/runs"
  "$build/bin/muster" run "$work/job.toml" launch.nproc=2 \
    launch.tee=none parallel.sharding=no_shard "launch.runs_dir=$work/runs" > /dev/null 2>&1
  two_muster=$(best "$two_muster" "$(muster_tps "$work"/runs/*/logs/rank-0.log)")
  report=$(grep -o 'run-store line): .*' "$work"/runs/*/logs/rank-0.log | sed 's/run-store line): //')
  port=$((20000 + RANDOM % 20000))
  for rank in 1 0; do
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2 RANK=$rank \
      "$python" "$here/reference/moe_reference.py" --threads "$threads" --steps "$steps" \
      > "$work/python-$rank.log" &
  done
  wait
  two_python=$(best "$two_python" "$(python_tps "$work/python-0.log")")
done

ratio() { awk -v m="$1" -v p="$2" 'BEGIN {print m / p}'; }
printf '%-44s %10s %10s %12s\n' "$threads thread(s) a rank, tokens/s per rank" muster python muster/python
printf '%-44s %10.0f %10.0f %12.2f\n' "1 rank (4 x 256 tokens a step)" "$one_muster" "$one_python" \
  "$(ratio "$one_muster" "$one_python")"
printf '%-44s %10.0f %10.0f %12.2f\n' "2 ranks, data parallel (4 x 256 each)" "$two_muster" \
  "$two_python" "$(ratio "$two_muster" "$two_python")"
echo "muster's reporting to the launcher (rank 0 of the last 2-rank run): $report"
