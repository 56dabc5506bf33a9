#!/usr/bin/env bash
# Device call 1 (2026-12-02, session 34): the GPU tests of the judge on main (a keep on the geomean times
# on only the workloads still too wide to call, from its first look), then sparse attention's 01 and 10 in
# a fresh project, then the indexer's 05 on the session-32 project (trunk 01 then 04) to compare with its
# 158 s there. At most 8 files come back: one tarball.
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0 AUTOGK_AGENT_SANDBOX=none AUTOGK_BENCH_PROFILE=off
W=/tmp/c1; rm -rf $W; mkdir -p $W
t0=$(date +%s)
sa=dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64
idx=dsa_topk_indexer_fp8_h64_d128_topk2048_ps64
ls benchmarks/flagship/$sa/[0-9][0-9]_*.py benchmarks/flagship/$idx/[0-9][0-9]_*.py > $W/head.txt
timeout -k 5 310 python3 -m pytest -v -o addopts= -p no:cacheprovider -m gpu --durations=0 tests/test_judge_gpu.py \
  tests/test_witness_gpu.py tests/test_verdict_gpu.py > $W/gpu_tests.log 2>&1
echo "tests rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
agent="python3 $PWD/benchmarks/flagship/attempt.py"
timeout -k 5 150 python3 benchmarks/loop_gpu.py --target $sa -n 2 --max-time 110 --grace 20 \
  --timing-budget-s 12 --agent-command "$agent" --out $W/sa > $W/sa.log 2>&1
echo "sa rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
left=$(( 555 - ($(date +%s) - t0) ))
# The indexer's attempts 01 and 04 are in the project's trunk already; 05 is the one the agent proposes.
mkdir -p /tmp/idxtried && mv benchmarks/flagship/$idx/0[14]_* /tmp/idxtried/
b=$PWD/benchmarks/results/session32_h200/call2/idx_project.bundle
git clone -q $b $W/idxproj && git -C $W/idxproj fetch -q --update-head-ok $b '+refs/*:refs/*'
timeout -k 5 $left python3 benchmarks/loop_gpu.py --target $idx -n 1 --max-time $(( left - 40 )) --grace 20 \
  --timing-budget-s 12 --project $W/idxproj --agent-command "$agent" --out $W/idx > $W/idx.log 2>&1
echo "idx rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
for t in sa idx; do grep -E "^\| [0-9]+ \||median|agreement|geomean|reason" $W/$t/loop_*.md > $W/${t}_summary.txt 2>/dev/null; done
rm -rf $W/idxproj
tar czf $OUT/call1.tgz --exclude='kernels_*' --exclude='report_*' -C $W . 2>/dev/null
cat $W/times.txt; grep -E "passed|failed|FAILED|Error" $W/gpu_tests.log | tail -15; cat $W/sa_summary.txt $W/idx_summary.txt | cut -c1-400
