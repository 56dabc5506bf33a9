#!/usr/bin/env bash
# Device call 1 (2026-12-03, session 38, judge of d0e96b3): the GPU tests on the judge whose untimed
# checks became one job and whose clock names other GPU users; one profiled ab job on rmsnorm (where an
# experiment's 19 s go); then A/A one comparison at a time through the loop's stages, in the time left.
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0
W=/tmp/c1; rm -rf $W; mkdir -p $W/aa $W/prof
t0=$(date +%s)
git log --oneline -1 > $W/head.txt
timeout -k 5 200 python3 -m pytest -q -o addopts= -m gpu -p no:cacheprovider tests/test_judge_gpu.py \
  tests/test_witness_gpu.py tests/test_verdict_gpu.py > $W/gpu_tests.txt 2>&1
echo "gpu tests rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
timeout -k 5 150 python3 benchmarks/profile_job.py --out $W/prof --target rmsnorm_h4096 --runs 2 --top 40 > $W/prof.log 2>&1
echo "profile rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
left=$(( 540 - ($(date +%s) - t0) ))
if [ $left -gt 60 ]; then
  AUTOGK_AGENT_SANDBOX=none AUTOGK_BENCH_PROFILE=off timeout -k 5 $(( left + 30 )) python3 benchmarks/aa_full.py \
    --out $W/aa --gpus 0 --procs 1 --budget-s $left --backend local > $W/aa.log 2>&1
  echo "aa rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
  python3 benchmarks/aa_full.py --summarize $W/aa > $W/aa_summary.txt 2>&1
fi
tar czf $OUT/call1.tgz --exclude='kernels_*' --exclude='report_*' -C $W . 2>/dev/null
cat $W/times.txt; tail -25 $W/gpu_tests.txt; head -60 $W/prof.log; tail -10 $W/aa_summary.txt
