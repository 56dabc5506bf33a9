#!/usr/bin/env bash
# Device call 1 (2026-12-02, session 33): the GPU tests of the judge on main (every timed call's outputs
# cross-checked, the clock in its own module), then sparse attention's 01 and 08 in a fresh project.
# At most 8 files come back: one tarball.
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0 AUTOGK_AGENT_SANDBOX=none AUTOGK_BENCH_PROFILE=off
W=/tmp/c1; rm -rf $W; mkdir -p $W
t0=$(date +%s)
sa=dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64
ls benchmarks/flagship/$sa/[0-9][0-9]_*.py > $W/head.txt
timeout -k 5 320 python3 -m pytest -v -o addopts= -p no:cacheprovider -m gpu --durations=0 tests/test_judge_gpu.py \
  tests/test_witness_gpu.py tests/test_verdict_gpu.py > $W/gpu_tests.log 2>&1
echo "tests rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
left=$(( 545 - ($(date +%s) - t0) ))
agent="python3 $PWD/benchmarks/flagship/attempt.py"
timeout -k 5 $left python3 benchmarks/loop_gpu.py --target $sa -n 2 --max-time $(( left - 60 )) --grace 20 \
  --timing-budget-s 12 --agent-command "$agent" --out $W/sa > $W/sa.log 2>&1
echo "sa rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
grep -E "^\| [0-9]+ \||median|agreement|geomean|reason" $W/sa/loop_*.md > $W/sa_summary.txt 2>/dev/null
tar czf $OUT/call1.tgz --exclude='kernels_*' -C $W . 2>/dev/null
cat $W/times.txt; grep -E "passed|failed|FAILED|Error" $W/gpu_tests.log | tail -15; cat $W/sa_summary.txt
