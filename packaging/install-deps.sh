#!/usr/bin/env bash
# Installs the Debian packages listed in packaging/apt-packages.txt.
# Idempotent: when every package is already installed it does not touch apt at all.
# Works as root and, for other users, through sudo.
set -euo pipefail
list="$(dirname "$0")/apt-packages.txt"
missing=()
while read -r pkg; do
  [[ -z "$pkg" || "$pkg" == \#* ]] && continue
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || missing+=("$pkg")
done < "$list"

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "deps: all packages in $list are installed"
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "deps: not root and no sudo: install ${missing[*]} as root" >&2; exit 1; }
  sudo=(sudo)
fi
echo "deps: installing ${missing[*]}"
# A fresh VM's apt-daily may hold the dpkg lock for a while: wait for it instead of failing.
lock=(-o DPkg::Lock::Timeout=600)
"${sudo[@]}" apt-get "${lock[@]}" update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${lock[@]}" install -y -q \
  --no-install-recommends "${missing[@]}"
