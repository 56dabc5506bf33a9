#!/usr/bin/env bash
# Device call 3 (2026-12-02, session 32): the indexer's attempt 05 on the project of call 2 (trunk: 01 then 04,
# restored from its bundle), sparse attention's 01 and 07 in a fresh project, then the rmsnorm tuner
# (`iterate -n 10`, forked kernel processes) in the time left. At most 8 files come back: one tarball.
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0 AUTOGK_AGENT_SANDBOX=none AUTOGK_BENCH_PROFILE=off
W=/tmp/c3; rm -rf $W; mkdir -p $W
git log -1 --oneline > $W/head.txt 2>&1
t0=$(date +%s)
idx=dsa_topk_indexer_fp8_h64_d128_topk2048_ps64
sa=dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64
mkdir -p benchmarks/flagship/$idx/tried benchmarks/flagship/$sa/tried
mv benchmarks/flagship/$idx/03_* benchmarks/flagship/$idx/tried/ 2>/dev/null
mv benchmarks/flagship/$sa/06_* benchmarks/flagship/$sa/tried/ 2>/dev/null
ls benchmarks/flagship/$idx/[0-9][0-9]_*.py benchmarks/flagship/$sa/[0-9][0-9]_*.py >> $W/head.txt
agent="python3 $PWD/benchmarks/flagship/attempt.py"
b=$PWD/benchmarks/results/session32_h200/call2/idx_project.bundle
git clone -q $b $W/idxproj && git -C $W/idxproj fetch -q --update-head-ok $b '+refs/*:refs/*'
timeout -k 5 230 python3 benchmarks/loop_gpu.py --target $idx -n 1 --max-time 180 --grace 25 --timing-budget-s 12 \
  --project $W/idxproj --agent-command "$agent" --out $W/idx > $W/idx.log 2>&1
echo "idx rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
timeout -k 5 170 python3 benchmarks/loop_gpu.py --target $sa -n 2 --max-time 110 --grace 20 --timing-budget-s 12 \
  --agent-command "$agent" --out $W/sa > $W/sa.log 2>&1
echo "sa rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
left=$(( 545 - ($(date +%s) - t0) ))
timeout -k 5 $left python3 benchmarks/loop_gpu.py --target rmsnorm_h4096 -n 10 --max-time $(( left - 60 )) --grace 20 \
  --timing-budget-s 15 --out $W/rms > $W/rms.log 2>&1
echo "rms rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
for t in idx sa rms; do grep -E "^\| [0-9]+ \||median|agreement|geomean|reason" $W/$t/loop_*.md > $W/${t}_summary.txt 2>/dev/null; done
tar czf $OUT/call3.tgz --exclude='kernels_*' -C $W . 2>/dev/null
cat $W/times.txt $W/idx_summary.txt $W/sa_summary.txt $W/rms_summary.txt
