#!/usr/bin/env bash
# Device call 1 (2026-12-03, session 37, main 80e9e6e: the judge and verdict rule of 5cc1913): A/A through
# the loop's own stages and verdict rule, 6 comparisons at once on the one GPU, for the whole call.
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0 AUTOGK_AGENT_SANDBOX=none AUTOGK_BENCH_PROFILE=off
W=/tmp/c1; rm -rf $W; mkdir -p $W/aa
t0=$(date +%s)
git log --oneline -1 > $W/head.txt
nproc >> $W/head.txt
timeout -k 5 568 python3 benchmarks/aa_full.py --out $W/aa --gpus 0 --procs 6 --budget-s 505 \
  --backend local > $W/aa.log 2>&1
echo "aa rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
python3 benchmarks/aa_full.py --summarize $W/aa > $W/aa_summary.txt 2>&1
tar czf $OUT/call1.tgz --exclude='kernels_*' --exclude='report_*' -C $W . 2>/dev/null
cat $W/times.txt; tail -12 $W/aa_summary.txt
