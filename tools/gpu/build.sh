#!/usr/bin/env bash
# tools/gpu/build.sh [BUILD_DIR [CMAKE_ARGS...]]: the one command that builds muster's engine on a GPU machine:
# the kernels (CUDA for CMAKE_CUDA_ARCHITECTURES, default 90), the engine against the LibTorch
# inside that machine's PyTorch (`python3 -c 'import torch; print(torch.utils.cmake_prefix_path)'`,
# a full LibTorch with CUDA), NCCL's header from PyTorch's nvidia-nccl or /usr/local/cuda, and
# their tests and GPU benchmarks (MUSTER_PARTS=engine: no launcher, daemon or Slurm parts).
# Our other dev libraries come as Debian packages in .gpu-deps/debs (tools/gpu/fetch-deps.sh,
# run where apt works), unpacked into BUILD_DIR/deps (not .gpu-deps/root: the device tool's
# carry of .gpu-deps replaces that folder at each call, and the binaries' libraries with it;
# the build folder stays between calls). Then:
#   ctest --test-dir BUILD_DIR -L gpu --output-on-failure     the GPU tests
#   BUILD_DIR/bench/gpu_kernels_bench                          the kernels against PyTorch's ops
# CMAKE_ARGS go to the configure step (e.g. -DMUSTER_WERROR=OFF for a first build against a new
# LibTorch, to list every new warning in one build).
# Environment: PYTHON (default python3), JOBS (default nproc), CUDA_ARCHS (default 90), TARGETS
# (build only these targets, e.g. "muster-train gpu_kernels_bench"), KEEP_GOING=1 (build every
# target that can be built past a failed one, as make -k: for a one-shot lease).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath -m "${1:-$root/build-gpu}")
shift $(($# > 0 ? 1 : 0))
python=${PYTHON:-python3}
deps=$root/.gpu-deps
unpacked=$build/deps
prefix=$unpacked/usr

if [[ -d $deps/debs ]] && compgen -G "$deps/debs/*.deb" > /dev/null; then
  if [[ ! -e $unpacked/.unpacked ]]; then
    mkdir -p "$unpacked"
    for deb in "$deps"/debs/*.deb; do dpkg-deb -x "$deb" "$unpacked"; done
    # what Debian's alternatives would link at install
    ln -sf cblas-netlib.h "$prefix/include/x86_64-linux-gnu/cblas.h"
    touch "$unpacked/.unpacked"
  fi
else
  echo "tools/gpu/build.sh: no packages in $deps/debs; using the system's libraries" \
       "(run tools/gpu/fetch-deps.sh where apt works if the build cannot find them)" >&2
fi

torch_prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
torch_root=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
# PyTorch's own NCCL (nvidia-nccl-cu*) where it has one: the header beside the library it loads
nccl_include=$("$python" - <<'PY' 2>/dev/null || true
import glob, os, site
for d in site.getsitepackages():
    for h in glob.glob(os.path.join(d, "nvidia", "**", "include", "nccl.h"), recursive=True):
        print(os.path.dirname(h)); raise SystemExit
PY
)
echo "tools/gpu/build.sh: LibTorch at $torch_prefix; NCCL header in ${nccl_include:-the CUDA toolkit}"

# MUSTER_UNITY=OFF: one object a file, which the GPU machine's 16 cores build side by side, and no
# unity batch can clash over code that only a CUDA LibTorch compiles (MUSTER_TORCH_CUDA)
args=(-S "$root" -B "$build" -DMUSTER_PARTS=engine -DMUSTER_CUDA=ON -DMUSTER_UNITY=OFF
      "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHS:-90}" "-DCMAKE_PREFIX_PATH=$torch_prefix;$prefix")
if [[ -d $prefix ]]; then
  args+=(-DMUSTER_GEMM=blas "-DBLAS_LIBRARIES=$prefix/lib/x86_64-linux-gnu/blas/libblas.so"
         "-DMUSTER_CBLAS_INCLUDE=$prefix/include/x86_64-linux-gnu")
fi
if [[ -n $nccl_include ]]; then args+=("-DMUSTER_NCCL_INCLUDE=$nccl_include"); fi
if command -v ninja > /dev/null && [[ ! -e $build/CMakeCache.txt ]]; then args+=(-G Ninja); fi
cmake "${args[@]}" "$@"
# cuBLAS and NCCL are opened at run time: in a process with LibTorch they are already loaded;
# the kernel tests alone find them through this (PyTorch's nvidia/*/lib, then the toolkit's)
libs=$("$python" - <<'PY'
import glob, os, site
dirs = [d for s in site.getsitepackages() for d in glob.glob(os.path.join(s, "nvidia", "**", "lib"), recursive=True)]
print(":".join(dirs + ["/usr/local/cuda/lib64"]))
PY
)
# shellcheck disable=SC2016  # ${LD_LIBRARY_PATH...} expands when the file is sourced
printf 'export LD_LIBRARY_PATH=%q${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\n' "$libs" > "$build/gpu-env.sh"
native=()
if [[ ${KEEP_GOING:-0} == 1 ]]; then
  native=(-- -k)  # make's; Ninja's takes a count of failures to stop at, 0 for none
  if grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja' "$build/CMakeCache.txt"; then native=(-- -k 0); fi
fi
# shellcheck disable=SC2086  # TARGETS is a list of target names
cmake --build "$build" -j "${JOBS:-$(nproc)}" ${TARGETS:+--target $TARGETS} ${native[@]+"${native[@]}"}
echo "tools/gpu/build.sh: built in $build (LibTorch: $torch_root); before running: . $build/gpu-env.sh"
