# Sourced by bench/compare_launch*.sh: timing helpers, the torchrun check and the result table.
# Needs: repeats (runs per figure).

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

measure() {  # measure CMD...: median ms over $repeats runs, and the last exit code
  local times=() result rc
  for ((i = 0; i < repeats; i++)); do
    result=$(timed "$@")
    times+=("${result% *}")
    rc=${result#* }
  done
  echo "$(printf '%s\n' "${times[@]}" | median) $rc"
}

# Skips the benchmark (exit 0) when torchrun cannot run here.
need_torchrun() {
  if ! /usr/bin/python3 -c 'import torch' 2>/dev/null || [[ ! -x $1 ]]; then
    echo "$(basename "$0"): SKIPPED: torchrun needs Debian's python3-torch (make deps) and $1"
    exit 0
  fi
}

ms() { echo "${1% *}"; }
code() { echo "${1#* }"; }
# print_table TITLE START_MUSTER START_TORCH FAIL_MUSTER FAIL_TORCH AFTER_MS: the figures as
# "<ms> <exit code>"; the failure figures less AFTER_MS (when the rank fails) are the stop times.
print_table() {
  local title=$1 m_start=$2 t_start=$3 m_fail=$4 t_fail=$5 after=$6
  local m_stop=$(( $(ms "$m_fail") - after )) t_stop=$(( $(ms "$t_fail") - after ))
  printf '%-34s %10s %10s %12s\n' "$title" muster torchrun "muster/torch"
  printf '%-34s %8s ms %8s ms %12.4f\n' "start to exit (trivial worker)" "$(ms "$m_start")" \
    "$(ms "$t_start")" "$(awk -v a="$(ms "$m_start")" -v b="$(ms "$t_start")" 'BEGIN {print a / b}')"
  printf '%-34s %8s ms %8s ms %12.4f\n' "failure to all stopped" "$m_stop" "$t_stop" \
    "$(awk -v a="$m_stop" -v b="$t_stop" 'BEGIN {print (a < 1 ? 1 : a) / b}')"
  printf '%-34s %10s %10s\n' "exit code (the rank's is 3)" "$(code "$m_fail")" "$(code "$t_fail")"
}
