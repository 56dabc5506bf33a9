#!/usr/bin/env bash
# Device call 2 (2026-12-03, session 38): where an rmsnorm ab job's 19 s go, now that the runner records
# its own side (launch to the judge's first line, the judge's life, the end) and each kernel process its
# start step by step (profile_job.py, 3 runs, the last one under cProfile); then A/A one at a time.
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0
W=/tmp/c2; rm -rf $W; mkdir -p $W/aa $W/prof
t0=$(date +%s)
git log --oneline -1 > $W/head.txt
timeout -k 5 150 python3 benchmarks/profile_job.py --out $W/prof --target rmsnorm_h4096 --runs 3 --top 40 > $W/prof.log 2>&1
echo "profile rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
python3 -X importtime -c "import torch" 2> $W/torch_importtime.txt; ( time python3 -c "import torch" ) 2> $W/torch_import.txt
( time python3 -c "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()" ) 2> $W/cuda_init.txt
left=$(( 400 - ($(date +%s) - t0) ))
if [ $left -gt 60 ]; then
  AUTOGK_AGENT_SANDBOX=none AUTOGK_BENCH_PROFILE=off timeout -k 5 $(( left + 30 )) python3 benchmarks/aa_full.py \
    --out $W/aa --gpus 0 --procs 1 --budget-s $left --backend local > $W/aa.log 2>&1
  echo "aa rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
  python3 benchmarks/aa_full.py --summarize $W/aa > $W/aa_summary.txt 2>&1
fi
tar czf $OUT/call2.tgz --exclude='kernels_*' --exclude='report_*' -C $W . 2>/dev/null
cat $W/times.txt $W/torch_import.txt $W/cuda_init.txt; grep -E "^run|job side" $W/prof.log; tail -10 $W/aa_summary.txt
