#!/usr/bin/env bash
# Device call 2 (2026-12-03, session 39, main at 2b00b45): call 1's jobs ran ~2.4x slower per timed round
# than session 38's, and two honest A/A pairs came out TAMPERED (the judge's clock 75 us a call against
# 4 us). Was it the judge template, or processes left by the GPU tests cut at their limit? On a fresh
# machine: three profiled jobs forked from the template, three started afresh (judge_start=exec), the
# GPU's processes and the top CPU users sampled every 5 s, then the witness's honest-pair test each way.
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0
W=/tmp/c2; rm -rf $W; mkdir -p $W
t0=$(date +%s)
git log --oneline -1 > $W/head.txt
snap() { { echo "== $1 t=$(( $(date +%s) - t0 ))"; nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader;
  ps -eo pid,ppid,pcpu,etimes,comm --sort=-pcpu | head -8; } >> $W/snap.txt 2>&1; }
( while true; do snap sample; sleep 5; done ) & SAMPLER=$!
snap start
timeout -k 5 130 python3 benchmarks/profile_job.py --out $W/prof_fork --target rmsnorm_h4096 --runs 3 --top 20 > $W/prof_fork.log 2>&1
echo "profile fork rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
snap after_fork
AUTOGK_BENCH_JUDGE_START=exec timeout -k 5 130 python3 benchmarks/profile_job.py --out $W/prof_exec --target rmsnorm_h4096 --runs 3 --top 20 > $W/prof_exec.log 2>&1
echo "profile exec rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
T=tests/test_witness_gpu.py::test_an_honest_pair_agrees_with_cupti_and_with_itself
timeout -k 5 90 python3 -m pytest -v -rs -o addopts= -m gpu -p no:cacheprovider --durations=3 $T > $W/witness_fork.txt 2>&1
echo "witness fork rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
AUTOGK_BENCH_JUDGE_START=exec timeout -k 5 90 python3 -m pytest -v -rs -o addopts= -m gpu -p no:cacheprovider --durations=3 $T > $W/witness_exec.txt 2>&1
echo "witness exec rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
kill $SAMPLER
tar czf $OUT/call2.tgz --exclude='kernels_*' --exclude='report_*' -C $W . 2>/dev/null
cat $W/times.txt; grep -E "^run|job side" $W/prof_fork.log $W/prof_exec.log; tail -4 $W/witness_fork.txt $W/witness_exec.txt
grep -c . $W/snap.txt; grep -v "^ *PID\|^==" $W/snap.txt | awk '{print $5}' | sort | uniq -c | sort -rn | head
