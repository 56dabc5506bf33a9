#!/usr/bin/env bash
# one device call (2026-12-02): power at -3 % through the loop's own stages (>= 20 comparisons), then
# the tuner's iterate on rmsnorm_h4096 with its best checked per workload by the CUDA-graph timer
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0
W=/tmp/call; rm -rf $W; mkdir -p $W/power
t0=$(date +%s)
timeout -k 5 370 python3 benchmarks/aa_full.py --out $W/power --gpus 0 --procs 1 --budget-s 318 --slower 0.0309 --backend local > $W/power.log 2>&1
echo "power rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
python3 benchmarks/aa_full.py --summarize $W/power > $W/power_summary.txt 2>&1
left=$(( 545 - ($(date +%s) - t0) ))
timeout -k 5 $left python3 benchmarks/loop_gpu.py --target rmsnorm_h4096 -n 10 --max-time $(( left - 75 )) --grace 25 --out $W/rmsnorm > $W/rmsnorm.log 2>&1
echo "rmsnorm rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
grep -E "^\| [0-9]+ \||median|agreement|geomean" $W/rmsnorm/loop_rmsnorm_h4096.md > $W/rmsnorm_summary.txt 2>/dev/null
cp $W/power_summary.txt $W/rmsnorm_summary.txt $W/times.txt $OUT/ 2>/dev/null
tar czf $OUT/call.tgz --exclude='kernels_*' -C $W . 2>/dev/null
cat $OUT/times.txt $OUT/power_summary.txt $OUT/rmsnorm_summary.txt
