#!/usr/bin/env bash
# Device call 1 (2026-12-02, session 32): the GPU's kernel processes forked (the default flipped in this
# copy only, the change under test), then (1) the indexer's attempts 01 and 04 through autogk under the
# wide-rounds rule, (2) the planted-kernel GPU tests of the judge, witness and verdict with forked kernels.
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0 AUTOGK_AGENT_SANDBOX=none AUTOGK_BENCH_PROFILE=off
W=/tmp/c1; rm -rf $W; mkdir -p $W
git log -1 --oneline > $OUT/head.txt 2>&1
sed -i 's/("exec" if device.startswith("cuda") else "fork")/"fork"/' autogk_git/bench/judge/forks.py
grep -n 'settings.get("kernel_start") or' autogk_git/bench/judge/forks.py >> $OUT/head.txt
t0=$(date +%s)
idx=dsa_topk_indexer_fp8_h64_d128_topk2048_ps64
mkdir -p benchmarks/flagship/$idx/tried && mv benchmarks/flagship/$idx/03_* benchmarks/flagship/$idx/tried/
timeout -k 5 290 python3 benchmarks/loop_gpu.py --target $idx -n 2 --max-time 230 --grace 20 --timing-budget-s 20 \
  --agent-command "python3 $PWD/benchmarks/flagship/attempt.py" --out $W/idx > $OUT/idx.log 2>&1
echo "idx rc=$? $(( $(date +%s) - t0 )) s" >> $OUT/times.txt
grep -E "^\| [0-9]+ \||median|agreement|geomean|reason|inconclusive" $W/idx/loop_$idx.md > $OUT/idx_summary.txt 2>/dev/null
left=$(( 555 - ($(date +%s) - t0) ))
timeout -k 5 $left python3 -m pytest -v -o addopts= -p no:cacheprovider -m gpu tests/test_judge_gpu.py \
  tests/test_witness_gpu.py tests/test_verdict_gpu.py > $OUT/gpu_tests_fork.log 2>&1
echo "tests rc=$? $(( $(date +%s) - t0 )) s" >> $OUT/times.txt
tar czf $OUT/idx.tgz --exclude='kernels_*' -C $W . 2>/dev/null
cat $OUT/times.txt $OUT/idx_summary.txt; grep -E "PASSED|FAILED|ERROR|XFAIL|passed|failed" $OUT/gpu_tests_fork.log | tail -30
