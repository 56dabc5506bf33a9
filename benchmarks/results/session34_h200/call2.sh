#!/usr/bin/env bash
# Device call 2 (2026-12-02, session 34): power at -3 % on rmsnorm through the loop's own stages, one
# comparison at a time, the whole call (>= 20 comparisons in one run), judge of main 09fc7dc (a keep on the
# geomean times on only the workloads still too wide to call, from its first look).
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0 AUTOGK_AGENT_SANDBOX=none AUTOGK_BENCH_PROFILE=off
W=/tmp/c2; rm -rf $W; mkdir -p $W/power
t0=$(date +%s)
timeout -k 5 555 python3 benchmarks/aa_full.py --out $W/power --gpus 0 --procs 1 --budget-s 525 --slower 0.0309 \
  --backend local > $W/power.log 2>&1
echo "power rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
python3 benchmarks/aa_full.py --summarize $W/power > $W/power_summary.txt 2>&1
tar czf $OUT/call2.tgz --exclude='kernels_*' -C $W . 2>/dev/null
cat $W/times.txt $W/power_summary.txt
