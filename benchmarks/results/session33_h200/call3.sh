#!/usr/bin/env bash
# Device call 3 (2026-12-02, session 33): power at -3 % on rmsnorm through the loop's own stages, one
# comparison at a time (call 2 ran two at once on one GPU: 4 of 20 honest candidates were TAMPERED by the
# judge's clock, the other process's GPU work inside their windows), then sparse attention's 01 and 09 in a
# fresh project. One tarball back.
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0 AUTOGK_AGENT_SANDBOX=none AUTOGK_BENCH_PROFILE=off
W=/tmp/c3; rm -rf $W; mkdir -p $W/power
t0=$(date +%s)
sa=dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64
ls benchmarks/flagship/$sa/[0-9][0-9]_*.py > $W/head.txt
timeout -k 5 395 python3 benchmarks/aa_full.py --out $W/power --gpus 0 --procs 1 --budget-s 360 --slower 0.0309 \
  --backend local > $W/power.log 2>&1
echo "power rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
python3 benchmarks/aa_full.py --summarize $W/power > $W/power_summary.txt 2>&1
left=$(( 560 - ($(date +%s) - t0) ))
agent="python3 $PWD/benchmarks/flagship/attempt.py"
timeout -k 5 $left python3 benchmarks/loop_gpu.py --target $sa -n 2 --max-time $(( left - 50 )) --grace 15 \
  --timing-budget-s 8 --agent-command "$agent" --out $W/sa > $W/sa.log 2>&1
echo "sa rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
grep -E "^\| [0-9]+ \||median|agreement|geomean|reason" $W/sa/loop_*.md > $W/sa_summary.txt 2>/dev/null
rm -rf $W/sa/report_*
tar czf $OUT/call3.tgz --exclude='kernels_*' -C $W . 2>/dev/null
cat $W/times.txt $W/power_summary.txt $W/sa_summary.txt
