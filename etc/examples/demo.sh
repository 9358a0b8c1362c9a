#!/usr/bin/env bash
# `make demo`: a tour of what muster does today, with the binaries in $1 (build/bin), ending
# with an embedded training run: `muster run etc/examples/tiny-moe.toml` (2 ranks, EP = 2,
# optim_grads_params) on the license texts, in a temporary runs directory.
set -euo pipefail
bin=${1:-build/bin}
here=$(cd "$(dirname "$0")" && pwd)
show() { printf '\n$ %s\n' "$*"; "$@"; }

echo "muster demo: Slurm hostlists, the Slurm step environment, the job file and the planner"
show "$bin/muster" --version
show "$bin/muster" hostnames 'gpu-a[01-03],rack[1-2]-node[7-8]'
show "$bin/muster" hostlist gpu-a01 gpu-a02 gpu-a03 gpu-a05 login1
# Task 3 of `srun -N2 --ntasks-per-node=2 --gpus-per-task=1`, its environment captured from a
# real Slurm job (tests/launcher/slurm_env/README.md).
mapfile -t step_env < "$here/../../tests/launcher/slurm_env/srun-N2-gpus-per-task1.task3.env"
printf '\n$ %s\n' "srun -N2 --ntasks-per-node=2 --gpus-per-task=1 muster slurm-step    # as task 3 sees it"
env "${step_env[@]}" "$bin/muster" slurm-step
show "$bin/muster" config "$here/job.toml" job.name=demo launch.nproc=4
printf '\n$ %s\n' "$bin/muster config $here/job.toml launch.nprocs=4    # a typo: exit 2 and the fix"
"$bin/muster" config "$here/job.toml" launch.nprocs=4 || echo "(exit $?)"
printf '\n$ %s\n' "$bin/muster hostnames 'gpu[3-1]'    # a bad hostlist: exit 2, where scontrol prints garbage"
"$bin/muster" hostnames 'gpu[3-1]' || echo "(exit $?)"
# The planner: Qwen3-30B-A3B (its Hugging Face config.json) on 2 nodes of 8 GPUs, then on 40 GiB
# GPUs, where it does not fit (exit 3) and says what would.
show "$bin/muster" plan "$here/qwen3-30b-a3b.toml" --nodes 2 --gpus-per-node 8
printf '\n$ %s\n' "$bin/muster plan $here/qwen3-30b-a3b.toml --nodes 2 --gpus-per-node 8 --gpu-memory 40GiB"
"$bin/muster" plan "$here/qwen3-30b-a3b.toml" --nodes 2 --gpus-per-node 8 --gpu-memory 40GiB |
  sed -n '/^memory per GPU/,$p' || true
printf '\n$ %s\n' "$bin/muster plan $here/qwen3-30b-a3b.toml --world 16 parallel.expert=6    # exit 2"
"$bin/muster" plan "$here/qwen3-30b-a3b.toml" --world 16 parallel.expert=6 || echo "(exit $?)"

# Training: the built-in engine on 2 ranks, the loss falling within the first steps.
runs=$(mktemp -d /tmp/muster-demo.XXXXXX)
show "$bin/muster" plan "$here/tiny-moe.toml" --world 2
show "$bin/muster" run "$here/tiny-moe.toml" launch.runs_dir="$runs"
run_dir=$(ls -d "$runs"/*/)
printf '\nthe run directory: %s\n' "$run_dir"
ls "$run_dir" "$run_dir/logs"
show "$bin/muster" status --runs-dir "$runs" "$(basename "$run_dir")"
