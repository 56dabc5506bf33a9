#!/usr/bin/env bash
# Device call 3 (session 39; call 1 again with -v, leftovers listed and killed after the tests): the GPU tests on the judge forked from a judge
# template (first time on the H200); three profiled rmsnorm ab jobs (launch cost with the template);
# then A/A one comparison at a time through the loop's stages, in the time left.
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0
W=/tmp/c3; rm -rf $W; mkdir -p $W/aa $W/prof
t0=$(date +%s)
git log --oneline -1 > $W/head.txt
timeout -k 5 380 python3 -m pytest -v -rs -o addopts= -m gpu -p no:cacheprovider --durations=20 tests/test_judge_gpu.py \
  tests/test_witness_gpu.py tests/test_verdict_gpu.py > $W/gpu_tests.txt 2>&1
echo "gpu tests rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
{ nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader; ps -eo pid,ppid,pcpu,etimes,args --sort=-pcpu | grep -v "ps -eo" | grep python | head -20; } > $W/leftovers.txt 2>&1
pkill -9 -f "autogk_git|pytest" ; sleep 2
timeout -k 5 60 python3 benchmarks/profile_job.py --out $W/prof --target rmsnorm_h4096 --runs 2 --top 20 > $W/prof.log 2>&1
echo "profile rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
left=$(( 575 - ($(date +%s) - t0) ))
if [ $left -gt 50 ]; then
  AUTOGK_AGENT_SANDBOX=none AUTOGK_BENCH_PROFILE=off timeout -k 5 $(( left + 25 )) python3 benchmarks/aa_full.py \
    --out $W/aa --gpus 0 --procs 1 --budget-s $left --backend local > $W/aa.log 2>&1
  echo "aa rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
  python3 benchmarks/aa_full.py --summarize $W/aa > $W/aa_summary.txt 2>&1
fi
tar czf $OUT/call3.tgz --exclude='kernels_*' --exclude='report_*' -C $W . 2>/dev/null
cat $W/times.txt; grep -E "PASSED|FAILED|SKIPPED|XFAIL|ERROR|passed|failed" $W/gpu_tests.txt | tail -30; cat $W/leftovers.txt; grep -E "^run|job side|launch|spent" $W/prof.log | head -30; tail -10 $W/aa_summary.txt
