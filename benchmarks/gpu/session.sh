#!/usr/bin/env bash
# One device call of a GPU session: the runbook under a time limit, then its output packed into DEST as one
# archive, with the runbook's log and timings beside it. The device tool brings back at most 8 files of at
# most 16 MiB each, two folders down, so the runbook's folder (run folders three deep) travels packed.
#
#   benchmarks/gpu/session.sh DEST_DIR                (on the device machine: benchmarks/gpu/session.sh "$OUT")
#   benchmarks/gpu/session.sh DEST_DIR RUNBOOK_OUT    (pack a runbook's existing output folder; run nothing)
#
# LIMIT_S (default 540) stops the runbook, and whatever it is running, in time to pack what it wrote within
# the device tool's 600 s per command. The runbook's own settings (BATCH, NOISY, BUDGET_S...) pass through.
# The exit status is the runbook's (124 when stopped at the limit); 2 for a bad DEST_DIR, 3 when nothing
# could be packed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:?usage: benchmarks/gpu/session.sh DEST_DIR [RUNBOOK_OUT]}
if [ ! -d "$dest" ] || [ ! -w "$dest" ]; then echo "session: $dest is not a writable folder" >&2; exit 2; fi
if [ $# -ge 2 ]; then
  work=$(cd "$2" 2>/dev/null && pwd) || { echo "session: no runbook output folder $2" >&2; exit 2; }
  rc=0
else
  limit=${LIMIT_S:-540}
  work=${TMPDIR:-/tmp}/gpu-runbook-$(date -u +%Y%m%dT%H%M%SZ)
  timeout -k 10 "$limit" "$here/runbook.sh" "$work"
  rc=$?
  [ "$rc" = 124 ] && echo "session: the runbook ran past ${limit}s and was stopped; packing what it wrote" >&2
  [ -d "$work" ] || { echo "session: the runbook wrote nothing (exit $rc)" >&2; exit 3; }
fi
name=$(basename "$work")
# The wheels' venv, the compile cache and generated shards are big and rebuilt by any run: left out.
tar -czf "$dest/$name.tar.gz" --exclude="$name/.venv" --exclude="$name/.cache" --exclude="$name/shards" \
  -C "$(dirname "$work")" "$name" || { echo "session: packing $work failed" >&2; exit 3; }
for f in runbook.log timings.tsv; do
  if [ -f "$work/$f" ]; then cp "$work/$f" "$dest/$name.${f##*.}"; fi
done
size=$(( $(stat -c %s "$dest/$name.tar.gz") / 1048576 ))
[ "$size" -lt 16 ] || echo "session: $name.tar.gz is ${size} MiB: the device tool brings back at most 16 MiB a file" >&2
echo "session: $dest/$name.tar.gz (${size} MiB), runbook exit $rc"
exit "$rc"
