#!/usr/bin/env bash
# Device call 2 (2026-12-03, session 37, same judge as call 1): the tuner's `iterate -n 10` on rmsnorm with
# its best checked by the independent timers (the GPU otherwise idle), then A/A through the loop's own
# stages, one comparison at a time (several at once on one GPU make the judge's clock see the others' work: call 1), in the time left. One tarball back.
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0
W=/tmp/c2; rm -rf $W; mkdir -p $W/aa
t0=$(date +%s)
git log --oneline -1 > $W/head.txt
# What NVML lists of the GPU's users from inside this machine (a judge could name a process that shares
# its GPU instead of blaming the candidate): one torch process holding a context, then the query.
python3 -c "import torch,time,os; x=torch.ones(1,device='cuda'); print('pid',os.getpid(),flush=True); time.sleep(12)" > $W/nvml_probe.txt 2>&1 &
sleep 9; nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv >> $W/nvml_probe.txt 2>&1
nvidia-smi >> $W/nvml_probe.txt 2>&1; wait
timeout -k 5 230 python3 benchmarks/loop_gpu.py --target rmsnorm_h4096 -n 10 --max-time 180 --grace 20 \
  --timing-budget-s 15 --out $W/rms > $W/rms.log 2>&1
echo "rms rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
grep -E "^\| [0-9]+ \||median|agreement|geomean" $W/rms/loop_*.md > $W/rms_summary.txt 2>/dev/null
rm -rf $W/rms/report_*
left=$(( 430 - ($(date +%s) - t0) ))
if [ $left -gt 60 ]; then
  AUTOGK_AGENT_SANDBOX=none AUTOGK_BENCH_PROFILE=off timeout -k 5 $(( left + 40 )) python3 benchmarks/aa_full.py \
    --out $W/aa --gpus 0 --procs 1 --budget-s $left --backend local > $W/aa.log 2>&1
  echo "aa rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
  python3 benchmarks/aa_full.py --summarize $W/aa > $W/aa_summary.txt 2>&1
fi
tar czf $OUT/call2.tgz --exclude='kernels_*' --exclude='report_*' -C $W . 2>/dev/null
cat $W/times.txt $W/nvml_probe.txt | head -30; cut -c1-300 $W/rms_summary.txt; tail -10 $W/aa_summary.txt
