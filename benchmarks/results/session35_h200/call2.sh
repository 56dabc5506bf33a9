#!/usr/bin/env bash
# Device call 2 (2026-12-02, session 35): issue 20's comparison on rmsnorm, `[search] strategy = trunk`
# against `beam` with the offline tuner, one arm after the other on the one GPU, 200 s each.
export PYTHONPATH=$PWD
W=/tmp/c2; rm -rf $W; mkdir -p $W
t0=$(date +%s)
git log --oneline -1 > $W/head.txt
timeout -k 5 530 python3 benchmarks/search_compare.py --targets rmsnorm_h4096 --max-time 200 --grace 25 \
  --wall-limit 520 --profile '' --out $W/search > $W/search.log 2>&1
echo "search rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
tar czf $OUT/call2.tgz --exclude='kernels_*' --exclude='report_*' -C $W . 2>/dev/null
cat $W/times.txt; tail -4 $W/search.log; sed -n '/^| target/,/^$/p' $W/search/search_compare.md | cut -c1-600
