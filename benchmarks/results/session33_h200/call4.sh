#!/usr/bin/env bash
# Device call 4 (2026-12-02, session 33): the indexer's 05 again on the project of session 32's call 2
# (trunk 01 then 04, restored from its bundle), with 30 timed calls a round on the H200 (10 before, under
# 1 GiB): session 32 call 3 kept it after 40 rounds in 158 s. One tarball back.
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0 AUTOGK_AGENT_SANDBOX=none AUTOGK_BENCH_PROFILE=off
W=/tmp/c4; rm -rf $W; mkdir -p $W
t0=$(date +%s)
idx=dsa_topk_indexer_fp8_h64_d128_topk2048_ps64
b=$PWD/benchmarks/results/session32_h200/call2/idx_project.bundle
git clone -q $b $W/idxproj && git -C $W/idxproj fetch -q --update-head-ok $b '+refs/*:refs/*'
timeout -k 5 190 python3 benchmarks/loop_gpu.py --target $idx -n 1 --max-time 160 --grace 15 --timing-budget-s 4 \
  --project $W/idxproj --agent-command "python3 $PWD/benchmarks/flagship/attempt.py" --out $W/idx > $W/idx.log 2>&1
echo "idx rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
grep -E "^\| [0-9]+ \||median|agreement|geomean|reason" $W/idx/loop_*.md > $W/idx_summary.txt 2>/dev/null
grep -E "round (1|5|10|13|15|20|30|40):|calls" $W/idx/iterate_*.log | head -20 > $W/idx_rounds.txt
rm -rf $W/idx/report_* $W/idxproj
tar czf $OUT/call4.tgz --exclude='kernels_*' -C $W . 2>/dev/null
cat $W/times.txt $W/idx_summary.txt $W/idx_rounds.txt
