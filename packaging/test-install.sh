#!/usr/bin/env bash
# test-install.sh [--replace] PACKAGE_DIR: installs the three Debian packages on this machine with
# apt-get, checks that every file lands where docs/install.md says (and nothing lands elsewhere),
# that the unit verifies, the configuration loads, the binaries run and the installed daemon
# answers, then purges them and checks nothing is left. Needs root. `make test-package` runs it;
# CI too, with --replace: a muster already installed is purged first instead of refused (CI's
# machines are throwaway; on yours, purge it yourself or keep it).
set -euo pipefail
replace=0
if [[ ${1:-} == --replace ]]; then replace=1; shift; fi
dir=$(cd "${1:?usage: test-install.sh [--replace] PACKAGE_DIR (build/packages)}" && pwd)
repo=$(cd "$(dirname "$0")/.." && pwd)
doc="$repo/docs/install.md"
packages=(muster musterd muster-slurm)
[[ $(id -u) -eq 0 ]] || { echo "test-install: run as root (it installs packages)" >&2; exit 1; }

failures=0
fail() { echo "test-install: FAIL: $*" >&2; failures=$((failures + 1)); }
step() { echo "== $*"; }
apt=(env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -y -q)

debs=()
for p in "${packages[@]}"; do
  deb=$(ls "$dir/${p}"_*.deb 2>/dev/null | head -1 || true)
  [[ -n "$deb" ]] || { echo "test-install: no ${p}_*.deb in $dir: run make package" >&2; exit 1; }
  debs+=("$deb")
done

# the documented paths: the rows of "What goes where" whose first cell is a backquoted path
mapfile -t documented < <(sed -n 's/^| `\(\/[^`]*\)` |.*/\1/p' "$doc")
[[ ${#documented[@]} -ge 10 ]] || { echo "test-install: no path table in $doc" >&2; exit 1; }

daemon_pid=
cleanup() {
  [[ -n "$daemon_pid" ]] && kill "$daemon_pid" 2>/dev/null || true
  if dpkg-query -W "${packages[@]}" >/dev/null 2>&1; then
    "${apt[@]}" purge "${packages[@]}" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

# a leftover install (an earlier run that died, or a machine image that had muster) would hide
# what these packages do
leftover=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ -n "$status" && "$status" != "not-installed" ]] && leftover+=("$p")
done
if [[ ${#leftover[@]} -gt 0 ]]; then
  if [[ $replace -eq 0 ]]; then
    echo "test-install: ${leftover[*]} installed already; purge first (apt-get purge ${leftover[*]})" \
      "or run with --replace" >&2
    trap - EXIT
    exit 1
  fi
  step "apt-get purge ${leftover[*]} (installed before this run; --replace)"
  "${apt[@]}" purge "${leftover[@]}" >/dev/null
fi

step "apt-get install ${debs[*]##*/}"
install_log=$(mktemp)
"${apt[@]}" install "${debs[@]}" 2>&1 | tee "$install_log"
if [[ ! -d /run/systemd/system ]]; then  # postinst says that nothing started musterd
  grep -q "systemd is not running here, so nothing started musterd" "$install_log" ||
    fail "without systemd, musterd's postinst did not say that nothing started musterd"
fi
rm -f "$install_log"

step "every documented path is installed"
for path in "${documented[@]}"; do
  [[ -e "$path" ]] || fail "$path: documented in docs/install.md, not installed"
done
step "every installed file is in a documented folder"
declare -A folders=()
for path in "${documented[@]}"; do folders[$(dirname "$path")]=1; done
for p in "${packages[@]}"; do
  while read -r file; do
    [[ -f "$file" ]] || continue
    case "$file" in /usr/share/doc/*/changelog* | /usr/share/doc/*/copyright) continue ;; esac
    [[ -n "${folders[$(dirname "$file")]+x}" ]] ||
      fail "$file (package $p): not in a folder docs/install.md names"
  done < <(dpkg -L "$p")
done

step "conffiles, the muster group, the man pages"
for conffile in /etc/muster/musterd.toml /etc/slurm/plugstack.conf.d/muster.conf \
  /etc/default/muster-slurm; do
  dpkg-query -W -f='${Conffiles}\n' musterd muster-slurm | grep -q " $conffile " ||
    fail "$conffile is not a conffile"
done
getent group muster >/dev/null || fail "musterd's postinst made no muster group"
for page in /usr/share/man/man1/muster.1.gz /usr/share/man/man1/muster-sbatch.1.gz \
  /usr/share/man/man8/musterd.8.gz; do
  gzip -t "$page" || fail "$page is not gzip"
  zcat "$page" | grep -q '^\.TH ' || fail "$page has no .TH line"
done

step "systemd-analyze verify /lib/systemd/system/musterd.service"
if command -v systemd-analyze >/dev/null; then
  man_check=--man=yes
  command -v man >/dev/null || man_check=--man=no  # no man-db: the page was checked above
  out=$(systemd-analyze verify "$man_check" /lib/systemd/system/musterd.service 2>&1) ||
    fail "systemd-analyze verify: $out"
  ! grep -q musterd <<<"$out" || fail "systemd-analyze verify complains: $out"
else
  fail "systemd-analyze is not installed (apt-get install systemd)"
fi

step "the installed binaries"
version=$(dpkg-query -W -f='${Version}' muster)
for bin in muster muster-train muster-sbatch musterd; do
  out=$("/usr/bin/$bin" --version) || fail "$bin --version failed"
  [[ "$out" == "$bin ${version%-*} (git "* ]] || fail "$bin --version: '$out'"
  "/usr/bin/$bin" --help >/dev/null || fail "$bin --help failed"
done
musterd --check-config >/dev/null || fail "musterd --check-config of /etc/muster/musterd.toml"
muster config /usr/share/muster/examples/tiny-moe.toml >/dev/null ||
  fail "muster config of the installed example"

step "the installed daemon, in the foreground, answers muster node status"
socket=/run/muster/musterd.sock
if [[ -d /run/systemd/system ]] && systemctl is-active --quiet musterd; then
  echo "systemd started it: asking that one"
else
  # what systemd's RuntimeDirectory= and StateDirectory= would make
  install -d -m 0755 /run/muster
  install -d -m 0750 /var/lib/muster
  log=$(mktemp)
  /usr/bin/musterd >"$log" 2>&1 &
  daemon_pid=$!
  for _ in $(seq 100); do [[ -S $socket ]] && break; sleep 0.1; done
  [[ -S $socket ]] || { cat "$log" >&2; fail "musterd made no socket at $socket in 10 s"; }
fi
if [[ -S $socket ]]; then
  [[ $(stat -c %G "$socket") == muster ]] || fail "$socket is not in group muster"
  status=$(MUSTER_DAEMON_SOCKET=$socket muster node status) || fail "muster node status failed"
  grep -q "^musterd   ${version%-*} " <<<"$status" || fail "muster node status: $status"
fi
if [[ -n "$daemon_pid" ]]; then
  kill -TERM "$daemon_pid"
  rc=0
  wait "$daemon_pid" || rc=$?
  daemon_pid=
  [[ $rc -eq 0 ]] || { cat "$log" >&2; fail "musterd ended with $rc on SIGTERM"; }
  [[ -f /var/lib/muster/musterd.db ]] || fail "musterd wrote no /var/lib/muster/musterd.db"
  rm -f "$log"
fi

step "apt-get purge ${packages[*]}"
"${apt[@]}" purge "${packages[@]}"
for path in "${documented[@]}" /etc/muster /var/lib/muster /run/muster /usr/lib/muster \
  /usr/share/muster /usr/share/doc/muster; do
  [[ ! -e "$path" ]] || fail "$path is left after purge"
done
for p in "${packages[@]}"; do
  [[ -z $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -v not-installed) ]] ||
    fail "$p is still known to dpkg after purge"
done

if [[ $failures -ne 0 ]]; then
  echo "test-install: $failures check(s) failed" >&2
  exit 1
fi
echo "test-install: the three packages installed, checked and purged cleanly"
