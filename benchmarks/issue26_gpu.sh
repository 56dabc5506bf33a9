#!/usr/bin/env bash
# Issue 26's remaining loop figures in one device call (under 540 s): A/A through the loop's own stages
# and verdict rule, and power at -3 % on rmsnorm_h4096 (the kernel against a copy 3.09 % slower), each
# with benchmarks/aa_full.py, writing JSONL, logs and a summary (with the RESULTS.md row) under OUT.
#
#   bash benchmarks/issue26_gpu.sh OUT [AA_GPUS] [POWER_GPUS] [AA_S] [POWER_S] [PROCS]
#
# AA_GPUS, POWER_GPUS: CUDA indices ("0", "0,1,2"). The same set: the two run one after the other
# (AA_S then POWER_S seconds of new comparisons); disjoint sets: side by side, each for its budget.
# PROCS: comparisons at once per GPU (default 1: with the judge's clock on, two jobs on one GPU share
# its time slices inside each other's windows). A budget stops new comparisons; the last one started
# still ends (~15-25 s), and every comparison is in its JSONL as soon as it ends.
#   one H200:        bash benchmarks/issue26_gpu.sh OUT 0 0 220 220          (~15 + ~15 comparisons)
#   nvidia-h200-x8:  bash benchmarks/issue26_gpu.sh OUT 0,1,2,3,4,5 6,7 470 470   (~190 A/A, ~60 power)
# Then: python benchmarks/aa_full.py --summarize OUT/aa ; python benchmarks/aa_full.py --summarize OUT/power
# CPU dry run of the plumbing (interpret backend, untimed verdicts): BACKEND=interpret GRACE=400 bash ... OUT 0 0 1 1
set -u
OUT=${1:?usage: bash benchmarks/issue26_gpu.sh OUT [AA_GPUS] [POWER_GPUS] [AA_S] [POWER_S] [PROCS]}
AA_GPUS=${2:-0}
POWER_GPUS=${3:-$AA_GPUS}
AA_S=${4:-220}
POWER_S=${5:-220}
PROCS=${6:-1}
BACKEND=${BACKEND:-local}
SLOWER=${SLOWER:-0.0309}  # candidate/parent = 1 / 1.0309 = 0.970
PY=${PYTHON:-python}
GRACE=${GRACE:-90}  # seconds past a budget for the comparisons still running (a CPU dry run: 400)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" AUTOGK_TRACKING_ENABLED=0
mkdir -p "$OUT/aa" "$OUT/power"
{ date -u; git rev-parse HEAD 2>/dev/null; nvidia-smi -L 2>/dev/null; "$PY" -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'; } > "$OUT/env.txt" 2>&1

aa() { timeout -k 10 $((AA_S + GRACE)) "$PY" benchmarks/aa_full.py --out "$OUT/aa" --gpus "$AA_GPUS" --procs "$PROCS" \
         --budget-s "$AA_S" --backend "$BACKEND" > "$OUT/aa.log" 2>&1; echo "aa rc=$?" >> "$OUT/aa.log"; }
power() { timeout -k 10 $((POWER_S + GRACE)) "$PY" benchmarks/aa_full.py --out "$OUT/power" --gpus "$POWER_GPUS" \
            --procs "$PROCS" --budget-s "$POWER_S" --slower "$SLOWER" --backend "$BACKEND" > "$OUT/power.log" 2>&1
          echo "power rc=$?" >> "$OUT/power.log"; }

t0=$(date +%s)
if [ "$AA_GPUS" = "$POWER_GPUS" ]; then
  aa; power
else
  aa & power & wait
fi
{ echo "wall $(( $(date +%s) - t0 )) s; AA_GPUS=$AA_GPUS POWER_GPUS=$POWER_GPUS AA_S=$AA_S POWER_S=$POWER_S PROCS=$PROCS backend $BACKEND"
  "$PY" benchmarks/aa_full.py --summarize "$OUT/aa"; echo; "$PY" benchmarks/aa_full.py --summarize "$OUT/power"; } \
  > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
