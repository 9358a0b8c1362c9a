#!/usr/bin/env bash
# bench/compare_train.sh BUILD_DIR: muster-train against the same model in eager PyTorch
# (bench/reference/moe_reference.py on Debian's python3-torch 1.13), side by side in one run:
# one rank, the same sizes (4 layers, hidden 256, 8 experts top-2, rows of 256 bytes of the
# license texts, 4 rows a step), the same number of threads, fp32 on the CPU. Reports the
# median tokens/s of steps 4..STEPS of each and their ratio.
# Target (issue 5): muster at least 1.3x the Python reference.
set -euo pipefail
build=${1:?usage: bench/compare_train.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
threads=${THREADS:-$(nproc)}
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
TOML

# The median of the numbers on stdin.
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

OMP_NUM_THREADS=$threads "$build/bin/muster-train" "$work/job.toml" > "$work/muster.log" 2>&1
muster=$(grep -o '| [0-9]* tok/s' "$work/muster.log" | awk '{print $2}' | tail -n +4 | median)
"$python" "$here/reference/moe_reference.py" --threads "$threads" --steps "$steps" > "$work/python.log"
python_tps=$(awk '{print $4}' "$work/python.log" | tail -n +4 | median)

printf '%-40s %10s %10s %12s\n' "1 rank, $threads thread(s), median" muster python muster/python
printf '%-40s %10.0f %10.0f %12.2f\n' "tokens/s (4 x 256 tokens a step)" "$muster" "$python_tps" \
  "$(awk -v m="$muster" -v p="$python_tps" 'BEGIN {print m / p}')"
