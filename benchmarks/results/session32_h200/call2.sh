#!/usr/bin/env bash
# Device call 2 (2026-12-02, session 32): the flagship through autogk, scripted coding agent: the indexer's
# attempts 01 and 04 (time enough for 04's wide workloads to reach a verdict), then sparse attention's 01 and 06.
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0 AUTOGK_AGENT_SANDBOX=none AUTOGK_BENCH_PROFILE=off
W=/tmp/c2; rm -rf $W; mkdir -p $W
git log -1 --oneline > $OUT/head.txt 2>&1
t0=$(date +%s)
idx=dsa_topk_indexer_fp8_h64_d128_topk2048_ps64
sa=dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64
mkdir -p benchmarks/flagship/$idx/tried && mv benchmarks/flagship/$idx/03_* benchmarks/flagship/$idx/tried/
ls benchmarks/flagship/$idx/[0-9][0-9]_*.py benchmarks/flagship/$sa/[0-9][0-9]_*.py >> $OUT/head.txt
agent="python3 $PWD/benchmarks/flagship/attempt.py"
timeout -k 5 360 python3 benchmarks/loop_gpu.py --target $idx -n 2 --max-time 310 --grace 25 --timing-budget-s 15 \
  --agent-command "$agent" --out $W/idx > $OUT/idx.log 2>&1
echo "idx rc=$? $(( $(date +%s) - t0 )) s" >> $OUT/times.txt
grep -E "^\| [0-9]+ \||median|agreement|geomean|reason" $W/idx/loop_$idx.md > $OUT/idx_summary.txt 2>/dev/null
left=$(( 560 - ($(date +%s) - t0) ))
timeout -k 5 $left python3 benchmarks/loop_gpu.py --target $sa -n 2 --max-time $(( left - 70 )) --grace 20 \
  --timing-budget-s 20 --agent-command "$agent" --out $W/sa > $OUT/sa.log 2>&1
echo "sa rc=$? $(( $(date +%s) - t0 )) s" >> $OUT/times.txt
grep -E "^\| [0-9]+ \||median|agreement|geomean|reason" $W/sa/loop_$sa.md > $OUT/sa_summary.txt 2>/dev/null
for t in idx sa; do cp $W/$t/iterate_*.log $OUT/${t}_iterate.log 2>/dev/null; cp $W/$t/loop_*.md $OUT/${t}_loop.md 2>/dev/null; cp $W/$t/project_*.bundle $OUT/${t}_project.bundle 2>/dev/null; done
cat $OUT/times.txt $OUT/idx_summary.txt $OUT/sa_summary.txt
