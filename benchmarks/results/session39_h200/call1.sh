#!/usr/bin/env bash
# Device call 1 (2026-12-03, session 39, main at 2b00b45): the GPU tests on the judge forked from a judge
# template (first time on the H200); three profiled rmsnorm ab jobs (launch cost with the template);
# then A/A one comparison at a time through the loop's stages, in the time left.
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0
W=/tmp/c1; rm -rf $W; mkdir -p $W/aa $W/prof
t0=$(date +%s)
git log --oneline -1 > $W/head.txt
timeout -k 5 345 python3 -m pytest -q -rs -o addopts= -m gpu -p no:cacheprovider --durations=20 tests/test_judge_gpu.py \
  tests/test_witness_gpu.py tests/test_verdict_gpu.py > $W/gpu_tests.txt 2>&1
echo "gpu tests rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
timeout -k 5 120 python3 benchmarks/profile_job.py --out $W/prof --target rmsnorm_h4096 --runs 3 --top 30 > $W/prof.log 2>&1
echo "profile rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
left=$(( 560 - ($(date +%s) - t0) ))
if [ $left -gt 50 ]; then
  AUTOGK_AGENT_SANDBOX=none AUTOGK_BENCH_PROFILE=off timeout -k 5 $(( left + 25 )) python3 benchmarks/aa_full.py \
    --out $W/aa --gpus 0 --procs 1 --budget-s $left --backend local > $W/aa.log 2>&1
  echo "aa rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
  python3 benchmarks/aa_full.py --summarize $W/aa > $W/aa_summary.txt 2>&1
fi
tar czf $OUT/call1.tgz --exclude='kernels_*' --exclude='report_*' -C $W . 2>/dev/null
cat $W/times.txt; tail -45 $W/gpu_tests.txt; grep -E "^run|job side|launch|spent" $W/prof.log | head -30; tail -10 $W/aa_summary.txt
