#!/usr/bin/env bash
# Device call 2 (2026-12-05, session 48): sparse attention's attempt 14 on the project of call 1 (trunk: 01),
# restored from its bundle, one experiment, no independent timing (the budget's last ~150 s).
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0 AUTOGK_AGENT_SANDBOX=none AUTOGK_BENCH_PROFILE=off
W=/tmp/c2; rm -rf $W; mkdir -p $W; t0=$(date +%s)
sa=dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64
ls benchmarks/flagship/$sa/[0-9][0-9]_*.py > $W/attempts.txt
b=$PWD/benchmarks/results/session48_h100/call1/s48a/sa/project_$sa.bundle
git clone -q $b $W/saproj && git -C $W/saproj fetch -q --update-head-ok $b '+refs/*:refs/*'
timeout -k 5 ${1:-100} python3 benchmarks/loop_gpu.py --target $sa -n 1 --max-time 40 --grace 20 --no-timing \
  --project $W/saproj --agent-command "python3 $PWD/benchmarks/flagship/attempt.py" --out $W/sa > $W/sa.log 2>&1
echo "sa rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
nvidia-smi -L >> $W/times.txt 2>&1
grep -E "^\| [0-9]+ \||median|reason" $W/sa/loop_$sa.md > $W/sa_summary.txt 2>/dev/null
tar czf $OUT/call2.tgz -C $W --exclude=saproj . 2>/dev/null
cat $W/times.txt; cut -c1-500 $W/sa_summary.txt; tail -5 $W/sa.log
