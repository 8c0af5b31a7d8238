#!/bin/sh
# Re-record the CPU samples in this folder (needs the `workloads` extra: torch, nvtx).
# Each serving trace gets its program-side timestamps beside it (<trace>.timestamps.json).
set -e
cd "$(dirname "$0")"
PY=${PYTHON:-python}
$PY -m tracelens.workloads.serve --device cpu --scheduler continuous --variant tuned \
    --requests 12 --interarrival-ms 60 --prompt 128 384 \
    --out serve_continuous_tuned_cpu.pt.trace.json.gz
$PY -m tracelens.workloads.serve --device cpu --scheduler static --variant tuned \
    --requests 12 --out serve_static_tuned_cpu.pt.trace.json.gz
$PY -m tracelens.workloads.serve --device cpu --scheduler continuous --variant naive \
    --requests 12 --out serve_continuous_naive_cpu.pt.trace.json.gz
$PY -m tracelens.workloads.train_starved --device cpu --steps 8 \
    --out train_starved_cpu.pt.trace.json.gz
