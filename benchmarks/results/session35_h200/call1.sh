#!/usr/bin/env bash
# Device call 1 (2026-12-02, session 35): the GPU tests of the judge on main (wide workloads dropped as
# each settles, one read of their states a look), then sparse attention's 01 and 11 in a fresh project,
# then A/A through the loop's own stages, one comparison at a time, in the time left. One tarball back.
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0 AUTOGK_AGENT_SANDBOX=none AUTOGK_BENCH_PROFILE=off
W=/tmp/c1; rm -rf $W; mkdir -p $W/aa
t0=$(date +%s)
sa=dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64
git log --oneline -1 > $W/head.txt
ls benchmarks/flagship/$sa/[0-9][0-9]_*.py >> $W/head.txt
timeout -k 5 310 python3 -m pytest -v -o addopts= -p no:cacheprovider -m gpu --durations=0 tests/test_judge_gpu.py \
  tests/test_witness_gpu.py tests/test_verdict_gpu.py > $W/gpu_tests.log 2>&1
echo "tests rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
agent="python3 $PWD/benchmarks/flagship/attempt.py"
timeout -k 5 150 python3 benchmarks/loop_gpu.py --target $sa -n 2 --max-time 110 --grace 20 \
  --timing-budget-s 12 --agent-command "$agent" --out $W/sa > $W/sa.log 2>&1
echo "sa rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
grep -E "^\| [0-9]+ \||median|agreement|geomean|reason" $W/sa/loop_*.md > $W/sa_summary.txt 2>/dev/null
left=$(( 540 - ($(date +%s) - t0) ))
if [ $left -gt 40 ]; then
  timeout -k 5 $(( left + 25 )) python3 benchmarks/aa_full.py --out $W/aa --gpus 0 --procs 1 --budget-s $left \
    --backend local > $W/aa.log 2>&1
  echo "aa rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
  python3 benchmarks/aa_full.py --summarize $W/aa > $W/aa_summary.txt 2>&1
fi
tar czf $OUT/call1.tgz --exclude='kernels_*' --exclude='report_*' -C $W . 2>/dev/null
cat $W/times.txt; grep -E "passed|failed|FAILED|Error" $W/gpu_tests.log | tail -15; cut -c1-400 $W/sa_summary.txt
cat $W/aa_summary.txt 2>/dev/null | tail -8
