#!/usr/bin/env bash
# Wheels for the GPU runbook on a machine without an index: gpuready's own wheel and what
# benchmarks/gpu/node-requirements.txt lists, for CPython $PY_VERSION on x86_64 Linux.
# Usage: benchmarks/gpu/pack.sh [OUT_DIR]   (default .cache/gpu-wheels; PY_VERSION=3.12)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-.cache/gpu-wheels}
py=${PY_VERSION:-3.12}
pip=${PIP:-.venv/bin/pip}
rm -rf "$out"
mkdir -p "$out"
"$pip" wheel -q --no-deps -w "$out" .
"$pip" download -q --only-binary=:all: --python-version "$py" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$out" -r benchmarks/gpu/node-requirements.txt
size=$(du -sm "$out" | cut -f1)
echo "pack: $(find "$out" -maxdepth 1 -name '*.whl' | wc -l) wheels, ${size} MiB in $out"
if [ "$size" -gt 60 ]; then
  echo "pack: ${size} MiB is more than a GPU session may carry (64 MiB with the tree)" >&2
  exit 1
fi
