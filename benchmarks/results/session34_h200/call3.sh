#!/usr/bin/env bash
# Device call 3 (2026-12-02, session 34): the indexer's 05 on the session-32 project again (trunk 01 then
# 04), the wide workloads now dropped as each settles; then A/A through the loop's own stages, one
# comparison at a time, in the time left.
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0 AUTOGK_AGENT_SANDBOX=none AUTOGK_BENCH_PROFILE=off
W=/tmp/c3; rm -rf $W; mkdir -p $W/aa
t0=$(date +%s)
idx=dsa_topk_indexer_fp8_h64_d128_topk2048_ps64
agent="python3 $PWD/benchmarks/flagship/attempt.py"
b=$PWD/benchmarks/results/session32_h200/call2/idx_project.bundle
git clone -q $b $W/idxproj && git -C $W/idxproj fetch -q --update-head-ok $b '+refs/*:refs/*'
timeout -k 5 230 python3 benchmarks/loop_gpu.py --target $idx -n 1 --max-time 190 --grace 20 --no-timing \
  --timing-budget-s 12 --project $W/idxproj --agent-command "$agent" --out $W/idx > $W/idx.log 2>&1
echo "idx rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
grep -E "^\| [0-9]+ \||reason|figures" $W/idx/loop_*.md > $W/idx_summary.txt 2>/dev/null
grep -E "round|phases" $W/idx/iterate_*.log | tail -4 >> $W/idx_summary.txt
git -C $W/idxproj notes --ref=refs/notes/autogk/bench show autogk/$idx/trunk 2>/dev/null | grep -o '"phases[^}]*}' >> $W/idx_summary.txt
rm -rf $W/idxproj
left=$(( 470 - ($(date +%s) - t0) ))
timeout -k 5 $(( left + 25 )) python3 benchmarks/aa_full.py --out $W/aa --gpus 0 --procs 1 --budget-s $left \
  --backend local > $W/aa.log 2>&1
echo "aa rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
python3 benchmarks/aa_full.py --summarize $W/aa > $W/aa_summary.txt 2>&1
tar czf $OUT/call3.tgz --exclude='kernels_*' --exclude='report_*' -C $W . 2>/dev/null
cat $W/times.txt $W/aa_summary.txt; cut -c1-400 $W/idx_summary.txt
