#!/usr/bin/env bash
# bench/run.sh BUILD_DIR: runs every benchmark; the entry point of `make bench`.
#   1. every executable BUILD_DIR/bench/*_bench (declared with muster_add_bench in
#      bench/CMakeLists.txt), with no arguments;
#   2. every script bench/compare_*.sh, with BUILD_DIR as its argument (muster set against
#      another tool, e.g. scontrol).
# To add a benchmark: a muster_add_bench(<name>_bench ...) line, or a new compare_<what>.sh.
# Each prints its own figures. All run even when one fails; the exit status is 1 if any failed.
set -uo pipefail

build=${1:?usage: bench/run.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
[[ -d $build/bench ]] || { echo "bench/run.sh: $build/bench does not exist; build first" >&2; exit 1; }

failed=()
run() {
  echo "=== $*"
  if ! "$@"; then failed+=("$1"); fi
  echo
}

shopt -s nullglob
for exe in "$build"/bench/*_bench; do
  [[ -x $exe ]] && run "$exe"
done
for script in "$here"/compare_*.sh; do
  run "$script" "$build"
done

if ((${#failed[@]})); then
  echo "bench/run.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "bench/run.sh: all benchmarks passed"
