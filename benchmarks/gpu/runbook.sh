#!/usr/bin/env bash
# The GPU runbook: one command on a GPU machine, a budget of 6 minutes on one H200 (BUDGET_S), of which MARGIN_S
# is kept free, one output folder (docs/gpu-runbook.md). The steps that give what nothing else does run always;
# optional steps that would not fit in what is left of the budget less the margin are skipped, saying so, and
# an optional step runs under a time limit of what was left when it started.
#
#   benchmarks/gpu/runbook.sh [OUT_DIR]        (default gpu-runbook-<UTC time>)
#   PLAN=1 benchmarks/gpu/runbook.sh [OUT_DIR] (print the steps, their commands and estimates; run nothing)
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
steps=${STEPS:-50}
warmup=${WARMUP_STEPS:-3}
batches=${BATCH:-256}
noisy=${NOISY:-1}
baseline=${BASELINE:-1}
disk_images=${DISK_IMAGES:-0}
disk_batch=${DISK_BATCH:-256}
disk_steps=${DISK_STEPS:-30}
pipeline_probe=${PIPELINE_PROBE:-0}
budget=${BUDGET_S:-360}
margin=${MARGIN_S:-30}
dcgm=${DCGM:-1}
# Seconds per step, for the plan and for the budget's decisions, measured on one H100. The lent machine is now one
# H200: the same Hopper processor (compute capability 9.0, the same arithmetic and matrix rates by NVIDIA's H200
# data sheet) with more and faster memory (141 GB HBM3e at 4.8 TB/s against 80 GB at 3.35), so steps bound by
# compiling, starting Python and computing take as long, and memory-bound ones no longer. From the runs of 2026-11-26
# (BENCHMARKS.md, "GPU runbook and the PyTorch path": recording + gpu-node + probes + one eager smoke run of
# 100 steps at batch 256 took 89 s) and 2026-11-27 (a first torch.compile of DenseNet-121 took 173 s in a
# plain loop; the goal is 90 s). The probe gpu-node and the recorder now run (torch, about 10 s) is a guess
# until a run's timings.tsv gives its figure. A real run replaces the compile's estimate with what its
# first smoke run took.
compile_s=${COMPILE_S:-173}
# EAGER=1: every smoke run eager (no compile to wait for; the plain loop's compiled variant is left out too), for a
# call that wants the noisy-neighbour proof where a cold compile leaves no room for it.
eager=${EAGER:-0}
est_inventory=3 est_record=20 est_node=25 est_probes=15 est_neighbour=5
est_train=30              # a smoke run without compiling: start (imports, model) and 53 steps
est_train_cached=45       # the same with the compile read back from the cache (goal: at most 20 s of it)
est_plain=25              # probe.py baseline, eager and fused variants (2 x 53 steps, one start)
# dcgmi diag's memory bandwidth and PCIe plugins on one GPU: NVIDIA gives no duration per plugin (the dcgmi diag
# reference gives only the levels': 1 "seconds", 2 "approximately two minutes"); a guess, and the step stops
# dcgmi at dcgm_limit_s, or at what is left of the budget, whichever comes first.
est_dcgm=45 dcgm_limit_s=${DCGM_LIMIT_S:-90}

refuse() { echo "runbook: $*" >&2; exit 3; }

if [ "${PLAN:-0}" = 1 ]; then
  # What a run would do, in order, without a GPU: the same steps as a run, each command printed (on fd 3,
  # past the redirections into OUT) instead of run. OUT is made for the redirections and removed after.
  exec 3>&1
  py=${PYTHON:-python3}
  run() { printf '  $ %s\n' "$*" >&3; }
  log() { echo "runbook: $*"; }
  [ -e "$out" ] && refuse "PLAN=1 writes nothing but needs OUT_DIR not to exist: $out"
  mkdir -p "$out"
  out_abs=$(cd "$out" && pwd)
  trap 'rm -rf "$out_abs"' EXIT
else
  command -v nvidia-smi >/dev/null 2>&1 || refuse "no nvidia-smi on this machine: run the runbook on a GPU machine"
  if ! gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>&1) || [ -z "$gpus" ]; then
    refuse "nvidia-smi cannot see the GPUs: $(echo "$gpus" | tail -n 1)"
  fi

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
  out_abs=$(cd "$out" && pwd)
  run() { "$@"; }
  log() { echo "runbook: $*" | tee -a "$out_abs/runbook.log" >&2; }
  log "$(echo "$gpus" | wc -l) GPU(s); python $("$py" -c 'import sys; print(sys.version.split()[0])'), torch $("$py" -c 'import torch; print(torch.__version__)')"
fi
out=$out_abs
started=$(date +%s)
step_started=$started
plan_clock=0
skipped=""
# torch.compile's cache starts empty in every runbook run, so the first smoke run's compile time is a first
# run's; gpuready keeps it under $XDG_CACHE_HOME/gpuready/torchinductor. Removed at the end (hundreds of MiB).
export XDG_CACHE_HOME="$out/.cache" PYTHONUNBUFFERED=1 LC_ALL=C
gpuready() { run "$py" -c 'from gpuready.core.cli import main; main()' "$@"; }
elapsed() { if [ "${PLAN:-0}" = 1 ]; then echo "$plan_clock"; else echo $(( $(date +%s) - started )); fi; }
step() {  # ESTIMATE MESSAGE: a step's headline; the plan shows the estimate and moves its clock by it
  local estimate=$1
  shift
  if [ "${PLAN:-0}" = 1 ]; then
    log "$* (~${estimate}s, at ~$(elapsed)s)"
    plan_clock=$((plan_clock + estimate))
  else
    log "$*"
  fi
}
left() { local l=$((budget - margin - $(elapsed))); [ "$l" -ge 0 ] && echo "$l" || echo 0; }
fits() {  # NAME ESTIMATE: 0 when an optional step fits in what is left of the budget less the margin, else say
  # it is skipped (in the log, in timings.tsv and on the last line)
  local left
  left=$(left)
  [ "$2" -le "$left" ] && return 0
  log "skipped $1: needs ~${2}s, ${left}s of the ${budget}s budget left (${margin}s kept as margin)"
  skipped="${skipped:+$skipped, }$1"
  [ "${PLAN:-0}" = 1 ] || printf '%s\tskipped\n' "$1" >> "$out/timings.tsv"
  return 1
}
timed() {  # STEP: one line per step in timings.tsv (seconds since the previous mark)
  local now
  now=$(date +%s)
  [ "${PLAN:-0}" = 1 ] || printf '%s\t%s\n' "$1" "$((now - step_started))" >> "$out/timings.tsv"
  step_started=$now
}
tail3() { [ "${PLAN:-0}" = 1 ] || tail -n 3 "$1" | tee -a "$out/runbook.log"; }

node() {  # NAME: gpu-node's run in NAME/, its output in NAME.txt
  gpuready validate gpu-node -i "$out/inventory" --artifacts "$out/$1" > "$out/$1.txt" 2>&1
  echo "exit $?" >> "$out/$1.txt"
  tail3 "$out/$1.txt"
}

record() {  # FOLDER [--note TEXT]: every command of the catalogue and of its measuring batch, raw
  run "$py" "$here/record.py" "$@" 2>&1 | tee -a "$out/runbook.log"
}

train() {  # NAME LIMIT_S, then validate training's options: artifacts in NAME/, output in NAME.txt, figures-NAME.json
  local name=$1 limit=$2
  shift 2
  gpuready validate training -i "$out/inventory" --framework pytorch --gpus 1 --mixed-precision \
    --warmup-steps "$warmup" --image-size 224 --timeout "$limit" --artifacts "$out/$name" "$@" > "$out/$name.txt" 2>&1
  echo "exit $?" >> "$out/$name.txt"
  tail3 "$out/$name.txt"
  [ "${PLAN:-0}" = 1 ] && return
  local summary
  summary=$(find "$out/$name" -mindepth 2 -maxdepth 2 -name summary.json 2>/dev/null | sort | head -n 1)
  if [ -n "$summary" ]; then
    "$py" "$here/probe.py" figures "$summary" "$out/flops.json" > "$out/figures-$name.json" 2>&1
    tee -a "$out/runbook.log" < "$out/figures-$name.json"
  fi
}

step "$est_inventory" "1/8 this machine as an inventory (localhost, node class from nvidia-smi)"
run "$py" "$here/record.py" --inventory-only "$out" 2>&1 | tee -a "$out/runbook.log"
timed inventory

step "$est_probes" "2/8 vector add on the GPU, and the FLOPs of one training image"
run "$py" "$here/probe.py" vector-add > "$out/vector-add.json" 2>&1
[ "${PLAN:-0}" = 1 ] || tee -a "$out/runbook.log" < "$out/vector-add.json"
run "$py" "$here/probe.py" flops > "$out/flops.json" 2>&1
timed probes

# The idle GPU first: its recording (a fixture for the nodes lab) and gpu-node's verdicts on it, which the noisy
# neighbour's runs are compared with.
step $((est_record + est_node)) "3/8 the recorder and gpu-node on the idle GPU"
record "$out/recorded" --note "idle: nothing else on the GPU"
node gpu-node
timed gpu-node

first_started=$(date +%s)
smoke=(); how="torch.compile"; cached=", its compile read from the cache"
if [ "$eager" = 1 ]; then smoke=(--eager); how="eager"; cached=""; compile_s=0; est_train_cached=$est_train; fi
for batch in $batches; do
  step $((est_train + compile_s)) "4/8 smoke training, first run (empty compile cache): DenseNet-121, 1 GPU, bf16, $how, batch $batch, $steps steps"
  train "training-b$batch" 420 --steps "$steps" --batch-size "$batch" "${smoke[@]}"
  timed "training-b$batch"
done
last=${batches##* }
# What a cold compile takes on this machine, for the plain loop's compiled variant below.
[ "${PLAN:-0}" = 1 ] || [ "$eager" = 1 ] || compile_s=$(( $(date +%s) - first_started - est_train ))
[ "$compile_s" -ge 0 ] || compile_s=0

# Right after the first smoke run, whose compile the busy smoke run reads back from the cache (no second cold
# compile), and before DCGM: the proof that a busy GPU is caught outranks DCGM's figures, and the lent machine has
# no DCGM. The smoke run measures beside the recorder and gpu-node (one lane each, both under the neighbour), so
# the step costs the longer lane, not the sum: with a first compile of 173 s the three in a row (95 s) left the
# step out of the budget. Each busy run still names the neighbour's pid or fails, whatever else runs beside it.
neighbour=$((est_neighbour + (est_record + est_node > est_train_cached ? est_record + est_node : est_train_cached)))
if [ "$noisy" = 1 ] && fits noisy "$neighbour"; then
  # Another process keeps the GPU busy with matrix products: neither the node's checks nor the smoke run may
  # pass. The recording in this state is what the nodes lab replays for a busy GPU. Their passing halves are the
  # idle runs above (gpu-node and the first smoke run).
  limit=$(left)
  step "$neighbour" "5/8 noisy neighbour: matrix products on the GPU while the smoke run (batch $last, $how$cached) and, beside it, the recorder then gpu-node measure"
  if [ "${PLAN:-0}" = 1 ]; then
    run "$py" "$here/probe.py" noisy --ready "$out/noisy.ready" "> $out/noisy.json &"
  else
    "$py" "$here/probe.py" noisy --ready "$out/noisy.ready" > "$out/noisy.json" 2>&1 &
    noisy_pid=$!
    for _ in $(seq 120); do [ -s "$out/noisy.ready" ] && break; sleep 0.5; done
    log "neighbour: $(cat "$out/noisy.ready" 2>/dev/null || echo 'not ready after 60s')"
  fi
  if [ "${PLAN:-0}" = 1 ]; then
    train "training-busy" "$limit" --steps "$steps" --batch-size "$last" "${smoke[@]}"
  else
    train "training-busy" "$limit" --steps "$steps" --batch-size "$last" "${smoke[@]}" &
    busy_train_pid=$!
  fi
  record "$out/recorded-busy" --note "busy: probe.py noisy ($(cat "$out/noisy.ready" 2>/dev/null || echo 'the neighbour')) on the GPU throughout, gpuready's smoke run beside it"
  node gpu-node-busy
  if [ "${PLAN:-0}" = 1 ]; then
    run wait "<the smoke run>"
    run kill "<the neighbour>"
  else
    wait "$busy_train_pid" 2>/dev/null
    kill "$noisy_pid" 2>/dev/null
    wait "$noisy_pid" 2>/dev/null
  fi
  run "$py" "$here/probe.py" noisy-verdict "$out" --idle gpu-node,"training-b$last" > "$out/noisy-verdict.json" 2>&1
  [ "${PLAN:-0}" = 1 ] || tee -a "$out/runbook.log" < "$out/noisy-verdict.json"
  timed noisy
fi

# DCGM's own figures where DCGM is installed (a plan cannot tell, so it counts the step): the memory bandwidth
# plugin (STREAM Triad) and the PCIe plugin's host-device copies print what they measured; its peer copies go only
# to DCGM's stats file (outputP2PBandwidthMatrix, nvvs/plugin_src/pcie/PcieMain.cpp). Raw output kept.
if [ "$dcgm" = 1 ] && { [ "${PLAN:-0}" = 1 ] || command -v dcgmi >/dev/null 2>&1; } && fits dcgm "$est_dcgm"; then
  limit=$(left)
  [ "$limit" -le "$dcgm_limit_s" ] || limit=$dcgm_limit_s
  step "$est_dcgm" "6/8 DCGM diagnostics with figures: dcgmi diag -r memory_bandwidth,pcie -j (stopped after ${limit}s)"
  run mkdir -p "$out/dcgm"
  run sh -c "dcgmi --version > '$out/dcgm/version.txt' 2>&1"
  run sh -c "timeout -k 5 $limit dcgmi diag -r memory_bandwidth,pcie -j > '$out/dcgm/diag.json' 2> '$out/dcgm/diag.err'; echo \$? > '$out/dcgm/diag.rc'"
  [ "${PLAN:-0}" = 1 ] || log "dcgm: exit $(cat "$out/dcgm/diag.rc"), $(wc -c < "$out/dcgm/diag.json") bytes of JSON in dcgm/diag.json"
  timed dcgm
elif [ "$dcgm" = 1 ] && [ "${PLAN:-0}" != 1 ] && ! command -v dcgmi >/dev/null 2>&1; then
  log "skipped dcgm: dcgmi is not installed here"
  printf 'dcgm\tskipped\n' >> "$out/timings.tsv"
fi

if [ "$baseline" = 1 ]; then
  # The plain loop first (the smoke run's goal is its best variant), its compiled variant only where a cold
  # compile still fits; the eager smoke run last.
  variants=eager,fused
  if fits plain-loop "$est_plain"; then
    estimate=$est_plain
    if [ "$eager" != 1 ] && fits plain-loop-compiled $((est_plain + compile_s)); then
      variants=$variants,compiled
      estimate=$((est_plain + compile_s))
    fi
    limit=$(left)
    step "$estimate" "7/8 a plain PyTorch loop (torchvision DenseNet-121, same settings; $variants) to compare"
    run timeout -k 5 "$limit" "$py" "$here/probe.py" baseline --batch-size "$last" --steps "$steps" --warmup-steps "$warmup" \
      --variants "$variants" > "$out/baseline.json" 2> "$out/baseline.err"
    [ "${PLAN:-0}" = 1 ] || tee -a "$out/runbook.log" < "$out/baseline.json"
    timed baseline
  fi
  if [ "$eager" != 1 ] && fits training-eager "$est_train"; then
    limit=$(left)
    step "$est_train" "7/8 the smoke run eagerly"
    train "training-eager" "$limit" --steps "$steps" --batch-size "$last" --eager
    timed eager
  fi
fi

if [ "$disk_images" -gt 0 ] && fits disk $((2 * est_train + 30)); then
  # The seeds' point on this machine: can the CPU cores decode fast enough to keep the GPU busy?
  limit=$(left)
  step $((2 * est_train + 30)) "8/8 training from disk: $disk_images generated PNGs in TFRecords, batch $disk_batch, $disk_steps steps, 'new' and 'old' pipelines"
  run "$py" "$here/probe.py" shards "$out/shards" --images "$disk_images" > "$out/shards.json" 2>&1
  for pipeline in new old; do
    train "disk-$pipeline" "$limit" --steps "$disk_steps" --batch-size "$disk_batch" --data "$out/shards" --pipeline "$pipeline"
  done
  run rm -rf "$out/shards"
  timed disk
fi
if [ "$pipeline_probe" = 1 ] && fits pipeline 30; then
  step 30 "8/8 input pipeline images/s per CPU core (PNG decode + resize in DataLoader workers)"
  run "$py" "$here/probe.py" pipeline > "$out/pipeline.json" 2>&1
  [ "${PLAN:-0}" = 1 ] || tee -a "$out/runbook.log" < "$out/pipeline.json"
  timed pipeline
fi

[ "${PLAN:-0}" = 1 ] || log "compile cache: $(du -sm "$out/.cache" 2>/dev/null | cut -f1) MiB, removed"
run rm -rf "$out/.venv" "$out/.cache"
took=$(elapsed)
left_out=${skipped:+; skipped: $skipped}
finished="done"
[ "${PLAN:-0}" = 1 ] && finished=plan
if [ "$took" -le $((budget - margin)) ]; then
  log "$finished: ~${took}s of the ${budget}s budget (${margin}s kept as margin)${left_out}: $out"
elif [ "$took" -le "$budget" ]; then
  log "$finished: ~${took}s of the ${budget}s budget, INTO its ${margin}s margin${left_out}: $out"
else
  log "$finished: ~${took}s, OVER the budget of ${budget}s${left_out}: $out"
fi
