#!/usr/bin/env bash
# The GPU runbook: one command on a GPU machine, about 4 minutes on one H100, one output folder (docs/gpu-runbook.md).
#
#   benchmarks/gpu/runbook.sh [OUT_DIR]        (default gpu-runbook-<UTC time>)
#
# Needs: nvidia-smi and a CUDA build of torch on $PYTHON (default python3), and gpuready, either
# installed in $PYTHON already or as wheels in $WHEELS (default .cache/gpu-wheels, made here by
# benchmarks/gpu/pack.sh), which go into a venv that sees $PYTHON's packages. Nothing is downloaded.
# Exit 3 with one line when the machine cannot run it (no GPU, no CUDA torch, no gpuready).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-gpu-runbook-$(date -u +%Y%m%dT%H%M%SZ)}
python=${PYTHON:-python3}
wheels=${WHEELS:-$here/../../.cache/gpu-wheels}
steps=${STEPS:-100}
batches=${BATCH:-64 256}
disk_images=${DISK_IMAGES:-2048}
disk_batch=${DISK_BATCH:-256}
disk_steps=${DISK_STEPS:-30}

refuse() { echo "runbook: $*" >&2; exit 3; }

command -v nvidia-smi >/dev/null 2>&1 || refuse "no nvidia-smi on this machine: run the runbook on a GPU machine"
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>&1) && [ -n "$gpus" ] \
  || refuse "nvidia-smi cannot see the GPUs: $(echo "$gpus" | tail -n 1)"

if "$python" -c 'import gpuready.core.cli' >/dev/null 2>&1; then
  py=$python
else
  ls "$wheels"/gpuready-*.whl >/dev/null 2>&1 || refuse "gpuready is not installed in $python and no wheels in $wheels (make them with benchmarks/gpu/pack.sh)"
  mkdir -p "$out"
  venv="$out/.venv"
  "$python" -m venv --system-site-packages "$venv" || refuse "cannot make a venv with $python"
  # A venv made from a venv (GPU images often keep torch in one) sees only the base interpreter's
  # packages, not the ones beside torch: add the caller's site folders after the venv's own.
  "$python" -c 'import site; print("\n".join(f"import site; site.addsitedir({d!r})" for d in site.getsitepackages()))' \
    > "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/runbook-caller.pth" \
    || refuse "cannot read the site folders of $python"
  "$venv/bin/python" -m pip install -q --no-index --no-deps "$wheels"/*.whl > "$out/install.log" 2>&1 \
    || refuse "installing the wheels failed: $(tail -n 1 "$out/install.log")"
  py=$venv/bin/python
fi
# Asked of the interpreter every step uses, so a torch that only $python sees is caught here.
cuda=$("$py" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>&1 | tail -n 1)
[ "$cuda" -ge 1 ] 2>/dev/null || refuse "torch on $py sees no CUDA device ($cuda): install a CUDA build of torch"

mkdir -p "$out"
out=$(cd "$out" && pwd)
log() { echo "runbook: $*" | tee -a "$out/runbook.log" >&2; }
started=$(date +%s)
gpuready() { "$py" -c 'from gpuready.core.cli import main; main()' "$@"; }
export PYTHONUNBUFFERED=1 LC_ALL=C
log "$(echo "$gpus" | wc -l) GPU(s); python $("$py" -c 'import sys; print(sys.version.split()[0])'), torch $("$py" -c 'import torch; print(torch.__version__)')"

log "1/6 recording the node catalogue's commands"
"$py" "$here/record.py" "$out/recorded" 2>&1 | tee -a "$out/runbook.log"

log "2/6 gpuready validate gpu-node against this machine (localhost)"
gpuready validate gpu-node -i "$out/recorded/inventory" --artifacts "$out/gpu-node" > "$out/gpu-node.txt" 2>&1
echo "exit $?" >> "$out/gpu-node.txt"
tail -n 3 "$out/gpu-node.txt" | tee -a "$out/runbook.log"

log "3/6 vector add on the GPU"
"$py" "$here/probe.py" vector-add > "$out/vector-add.json" 2>&1
tee -a "$out/runbook.log" < "$out/vector-add.json"

train() {  # NAME, then validate training's options: artifacts in NAME/, output in NAME.txt, figures-NAME.json
  local name=$1
  shift
  gpuready validate training -i "$out/recorded/inventory" --framework pytorch --gpus 1 --mixed-precision \
    --warmup-steps 10 --image-size 224 --timeout 420 --artifacts "$out/$name" "$@" > "$out/$name.txt" 2>&1
  echo "exit $?" >> "$out/$name.txt"
  tail -n 3 "$out/$name.txt" | tee -a "$out/runbook.log"
  local summary
  summary=$(ls "$out/$name"/*/summary.json 2>/dev/null | head -n 1)
  if [ -n "$summary" ]; then
    "$py" "$here/probe.py" figures "$summary" "$out/flops.json" > "$out/figures-$name.json" 2>&1
    tee -a "$out/runbook.log" < "$out/figures-$name.json"
  fi
}

"$py" "$here/probe.py" flops > "$out/flops.json" 2>&1
for batch in $batches; do
  log "4/6 PyTorch smoke training: DenseNet-121, 1 GPU, bf16, batch $batch, $steps steps, synthetic data"
  train "training-b$batch" --steps "$steps" --batch-size "$batch"
done

if [ "$disk_images" -gt 0 ]; then
  # The seeds' point on this machine: can the CPU cores decode fast enough to keep the GPU busy?
  log "5/6 training from disk: $disk_images generated PNGs in TFRecords, batch $disk_batch, $disk_steps steps, 'new' and 'old' pipelines"
  "$py" "$here/probe.py" shards "$out/shards" --images "$disk_images" > "$out/shards.json" 2>&1
  for pipeline in new old; do
    train "disk-$pipeline" --steps "$disk_steps" --batch-size "$disk_batch" --data "$out/shards" --pipeline "$pipeline"
  done
  rm -rf "$out/shards"
fi

log "6/6 input pipeline images/s per CPU core (PNG decode + resize in DataLoader workers)"
"$py" "$here/probe.py" pipeline > "$out/pipeline.json" 2>&1
tee -a "$out/runbook.log" < "$out/pipeline.json"

rm -rf "$out/.venv"
log "done in $(( $(date +%s) - started ))s: $out"
