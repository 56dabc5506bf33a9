#!/usr/bin/env bash
# Device call 2 (2026-12-02, session 33): the seal test on the cudagraph timer again (after the NameError fix),
# power at -3 % on rmsnorm through the loop's own stages (two comparisons at once, >= 20 in one run), then
# the tuner's `iterate -n 10` on rmsnorm with its best checked by the independent timers. One tarball back.
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0
W=/tmp/c2; rm -rf $W; mkdir -p $W/power
t0=$(date +%s)
timeout -k 5 90 python3 -m pytest -v -o addopts= -p no:cacheprovider -m gpu tests/test_judge_gpu.py \
  -k "seal_lets_honest" > $W/gpu_seal.log 2>&1
echo "seal rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
timeout -k 5 330 python3 benchmarks/aa_full.py --out $W/power --gpus 0 --procs 2 --budget-s 285 --slower 0.0309 \
  --backend local > $W/power.log 2>&1
echo "power rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
python3 benchmarks/aa_full.py --summarize $W/power > $W/power_summary.txt 2>&1
left=$(( 550 - ($(date +%s) - t0) ))
timeout -k 5 $left python3 benchmarks/loop_gpu.py --target rmsnorm_h4096 -n 10 --max-time $(( left - 60 )) --grace 20 \
  --timing-budget-s 15 --out $W/rms > $W/rms.log 2>&1
echo "rms rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
grep -E "^\| [0-9]+ \||median|agreement|geomean" $W/rms/loop_*.md > $W/rms_summary.txt 2>/dev/null
rm -rf $W/rms/report_*
tar czf $OUT/call2.tgz --exclude='kernels_*' -C $W . 2>/dev/null
cat $W/times.txt; grep -E "passed|failed" $W/gpu_seal.log | tail -3; cat $W/power_summary.txt $W/rms_summary.txt
