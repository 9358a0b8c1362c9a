#!/usr/bin/env bash
# bench/compare_hostnames_scontrol.sh BUILD_DIR [REPS]: `muster hostnames` against
# `scontrol show hostnames` on 10,000-node lists, whole process each call (start-up included,
# as a job script pays it). Checks both print the same hosts, then times REPS calls of each
# (default 30) and prints milliseconds per call and the ratio. scontrol gets a throwaway
# slurm.conf (ClusterName + SlurmctldHost; no daemon). Skips, exit 0, without scontrol.
set -euo pipefail

build=${1:?usage: compare_hostnames_scontrol.sh BUILD_DIR [REPS]}
reps=${2:-30}
muster=$build/bin/muster
[[ -x $muster ]] || { echo "compare_hostnames_scontrol: $muster is not built" >&2; exit 1; }
if ! command -v scontrol >/dev/null; then
  echo "compare_hostnames_scontrol: SKIPPED: scontrol is not installed"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'ClusterName=mustertest\nSlurmctldHost=localhost\n' > "$tmp/slurm.conf"
export SLURM_CONF=$tmp/slurm.conf

# Milliseconds per call of "$@" (output discarded), over $reps calls.
ms_per_call() {
  local start end
  start=$(date +%s%N)
  for ((i = 0; i < reps; i++)); do "$@" > /dev/null; done
  end=$(date +%s%N)
  awk -v ns=$((end - start)) -v n="$reps" 'BEGIN { printf "%.3f", ns / 1e6 / n }'
}

compare() {
  local name=$1 list=$2
  "$muster" hostnames "$list" > "$tmp/muster.out"
  scontrol show hostnames "$list" > "$tmp/scontrol.out" 2> "$tmp/scontrol.err"
  if ! cmp -s "$tmp/muster.out" "$tmp/scontrol.out" || [[ -s $tmp/scontrol.err ]]; then
    echo "compare_hostnames_scontrol: $name: outputs differ" >&2
    return 1
  fi
  local hosts ours theirs
  hosts=$(wc -l < "$tmp/muster.out")
  ours=$(ms_per_call "$muster" hostnames "$list")
  theirs=$(ms_per_call scontrol show hostnames "$list")
  printf '  %-11s %6d hosts %6d-byte list  muster %7.2f ms  scontrol %7.2f ms  scontrol/muster %5.1fx\n' \
    "$name" "$hosts" "${#list}" "$ours" "$theirs" "$(awk -v a="$theirs" -v b="$ours" 'BEGIN { printf "%.1f", a / b }')"
}

echo "muster hostnames vs scontrol show hostnames, $reps calls each ($(scontrol --version))"
compare "one range" "gpu[00001-10000]"
compare "racks" "rack[01-10]-gpu[0001-1000]"
# Every third node missing: 5,000 ranges in one bracket, built by muster's own compression.
fragmented=$("$muster" hostlist "$(seq -f 'n%05g' 1 15000 | awk 'NR % 3' | paste -sd, -)")
compare "fragmented" "$fragmented"
