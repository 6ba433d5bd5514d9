#!/usr/bin/env bash
# The CUDA check on a GPU machine whose Python packages are fixed (issue 46): tilegrad installed over them without
# its dependencies or a build environment, then benchmarks/gpu_check.py. Usage, from the repository's root:
#   bash benchmarks/gpu_check.sh OUT [--budget SECONDS ...]
set -uo pipefail
out=${1:?usage: bash benchmarks/gpu_check.sh OUT [gpu_check.py options]}
shift
mkdir -p "$out"
nvidia-smi > "$out/nvidia_smi.txt" 2>&1
if ! python3 -m pip install --no-deps --no-build-isolation -q -e . > "$out/install.log" 2>&1; then
    echo "installing tilegrad failed:"; tail -20 "$out/install.log"; exit 1
fi
PYTHONUNBUFFERED=1 python3 benchmarks/gpu_check.py "$out" "$@" 2>&1 | tee "$out/check.log"
