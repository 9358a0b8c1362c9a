#!/usr/bin/env bash
# tools/gpu/fetch-deps.sh: downloads the Debian packages of tools/gpu/deps.txt into
# .gpu-deps/debs (ignored by git) on this machine, which has apt; the GPU machine, which has no
# network, gets them with the working tree (name .gpu-deps in the device tool's carry) and
# tools/gpu/build.sh unpacks them there. About 4 MB.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/.gpu-deps/debs
mkdir -p "$out"
mapfile -t packages < <(grep -v '^#' "$root/tools/gpu/deps.txt" | tr ' ' '\n' | grep .)
cd "$out"
rm -f ./*.deb
apt-get download "${packages[@]}"
ls -1 "$out"
