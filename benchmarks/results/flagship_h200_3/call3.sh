#!/usr/bin/env bash
# one device call: the flagship (both DSA targets), the rmsnorm tuner, power at -3 %; everything tarred
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0
W=/tmp/call3; rm -rf $W; mkdir -p $W
git log -1 --oneline > $W/head.txt 2>&1
t0=$(date +%s)
timeout 290 bash benchmarks/flagship/run_h200.sh $W/flagship 100 > $W/flagship_run.log 2>&1
echo "flagship $(( $(date +%s) - t0 )) s" >> $W/times.txt
timeout 200 python3 benchmarks/loop_gpu.py --target rmsnorm_h4096 -n 10 --max-time 150 --grace 30 --out $W/rmsnorm > $W/rmsnorm.log 2>&1
echo "rmsnorm rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
left=$(( 520 - ($(date +%s) - t0) ))
if [ $left -gt 90 ]; then
  mkdir -p $W/power
  timeout $left python3 benchmarks/aa_full.py --out $W/power --gpus 0 --procs 1 --budget-s $(( left - 45 )) --slower 0.0309 --backend local > $W/power.log 2>&1
  python3 benchmarks/aa_full.py --summarize $W/power > $W/power_summary.txt 2>&1
fi
echo "all $(( $(date +%s) - t0 )) s" >> $W/times.txt
cp $W/flagship/summary.txt $OUT/flagship_summary.txt 2>/dev/null
grep -E "^\| [0-9]+ \||median|agreement|geomean" $W/rmsnorm/loop_rmsnorm_h4096.md > $OUT/rmsnorm_summary.txt 2>/dev/null
cp $W/power_summary.txt $OUT/ 2>/dev/null
cp $W/times.txt $OUT/
tar czf $OUT/call3.tgz --exclude='kernels_*' -C $W . 2>/dev/null
ls -la $OUT
