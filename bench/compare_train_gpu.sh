#!/usr/bin/env bash
# bench/compare_train_gpu.sh BUILD_DIR: on a GPU machine, muster-train on one GPU against the
# same model in PyTorch there (bench/reference/moe_reference.py), eager and torch.compile, side
# by side in one run: the MoE of about 1B parameters of bench/gpu/moe-1b.toml (16 layers, hidden
# 1024, 32 experts of 640 top-4, one dense layer first; byte-level, 4 rows of 2048 tokens a
# step), bf16 autocast with fp32 weights, STEPS steps (default 30). Reported: the median
# tokens/s over steps 5.. and MFU (muster's own figure, from its log), and muster's ratio to
# each. Target (issue 9): muster at
# least 1.2x PyTorch eager. Where muster-train or PyTorch has no CUDA device it says it skipped.
# Environment: STEPS, PYTHON, COMPILE_TIMEOUT (seconds for the torch.compile run, default 900;
# 0 leaves torch.compile out), MUSTER_ARGS (more key=value overrides for muster-train, e.g.
# "train.expert_gemm=split"), LOGS (a folder that keeps the three runs' logs).
set -euo pipefail
build=${1:?usage: bench/compare_train_gpu.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
steps=${STEPS:-30}
python=${PYTHON:-python3}
if ! "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "compare_train_gpu: SKIPPED: no CUDA device (or $python has no torch with CUDA)"
  exit 0
fi
work=$(mktemp -d)
keep() { if [[ -n ${LOGS:-} ]]; then mkdir -p "$LOGS" && cp "$work"/* "$LOGS"/ 2> /dev/null || true; fi; }
trap 'keep; rm -rf "$work"' EXIT
# shellcheck disable=SC2086  # MUSTER_ARGS is a list of overrides
if ! MUSTER_RUN_DIR="$work" "$build/bin/muster-train" "$here/gpu/moe-1b.toml" "train.steps=$steps" \
    ${MUSTER_ARGS:-} > "$work/muster.log" 2>&1; then
  if grep -q 'train.device = "cuda" but' "$work/muster.log"; then
    echo "compare_train_gpu: SKIPPED: $(grep -o 'train.device = "cuda" but[^;]*' "$work/muster.log")"
    exit 0
  fi
  cat "$work/muster.log" >&2
  exit 1
fi
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
muster_tps=$(grep -o '| [0-9]* tok/s' "$work/muster.log" | awk '{print $2}' | tail -n +5 | median)
muster_mfu=$(grep -o 'MFU [0-9.]*%' "$work/muster.log" | awk '{print $2}' | tail -n +5 | tr -d % | median || true)
args=(--layers 16 --hidden 1024 --ffn 4096 --heads 16 --kv_heads 8 --experts 32 --moe_ffn 640
      --topk 4 --first_dense 1 --seq 2048 --micro 4 --steps "$steps" --device cuda
      --precision bf16)
"$python" "$here/reference/moe_reference.py" "${args[@]}" > "$work/eager.log"
eager=$(awk '{print $4}' "$work/eager.log" | tail -n +5 | median)
compiled=0
compile_rc=0
if [[ ${COMPILE_TIMEOUT:-900} == 0 ]]; then
  compile_rc=skipped
else
  timeout "${COMPILE_TIMEOUT:-900}" "$python" "$here/reference/moe_reference.py" "${args[@]}" \
    --compile > "$work/compile.log" 2> "$work/compile.err" || compile_rc=$?
fi
if [[ $compile_rc == skipped ]]; then
  echo "compare_train_gpu: torch.compile left out (COMPILE_TIMEOUT=0)"
elif [[ $compile_rc == 0 ]]; then
  compiled=$(awk '{print $4}' "$work/compile.log" | tail -n +5 | median)
elif [[ $compile_rc == 124 ]]; then
  echo "compare_train_gpu: torch.compile: $steps steps did not finish in COMPILE_TIMEOUT=${COMPILE_TIMEOUT:-900} s" \
       "($(grep -c '^step' "$work/compile.log") done)"
else
  echo "compare_train_gpu: torch.compile failed (exit $compile_rc): $(tail -1 "$work/compile.err")"
fi
gpu=$("$python" -c 'import torch; print(torch.cuda.get_device_name())')
ratio() { awk -v m="$1" -v p="$2" 'BEGIN {print (p > 0) ? m / p : 0}'; }
echo "GPU: $gpu; ~1B-parameter MoE, bf16, 4 x 2048 tokens a step"
printf '%-26s %12s %14s\n' "tokens/s (median, 5..)" tokens/s "muster/this"
printf '%-26s %12.0f %14s   MFU %s%%\n' "muster-train" "$muster_tps" "" "${muster_mfu:-?}"
printf '%-26s %12.0f %14.2f\n' "PyTorch eager" "$eager" "$(ratio "$muster_tps" "$eager")"
printf '%-26s %12.0f %14.2f\n' "PyTorch torch.compile" "$compiled" "$(ratio "$muster_tps" "$compiled")"
