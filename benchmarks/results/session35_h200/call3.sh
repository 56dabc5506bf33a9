#!/usr/bin/env bash
# Device call 3 (2026-12-02, session 35): issue 20's comparison on DSA sparse attention, trunk against beam
# with the offline tuner, one arm after the other, then ncu on the beam arm's final trunk kernel through
# loop/profile. An `ncu` first on PATH passes every call to the real one and keeps a copy of each
# `--import ... --csv` output (the raw CSV that bench/ncu.py parses) under ncu_csv/.
export PYTHONPATH=$PWD
W=/tmp/c3; rm -rf $W; mkdir -p $W/bin $W/ncu_csv
t0=$(date +%s)
git log --oneline -1 > $W/head.txt
real=$(command -v ncu); echo "ncu: $real" >> $W/head.txt
cat > $W/bin/ncu <<EOS
#!/usr/bin/env bash
case " \$* " in
  *" --import "*) "$real" "\$@" | tee $W/ncu_csv/\$(date +%s%N).csv ;;
  *) exec "$real" "\$@" ;;
esac
EOS
chmod +x $W/bin/ncu; export PATH=$W/bin:$PATH
sa=dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64
timeout -k 5 400 python3 benchmarks/search_compare.py --targets $sa --max-time 110 --grace 30 \
  --wall-limit 390 --profile ${sa}__beam --out $W/search > $W/search.log 2>&1
echo "search rc=$? $(( $(date +%s) - t0 )) s" >> $W/times.txt
tar czf $OUT/call3.tgz --exclude='kernels_*' --exclude='report_*' -C $W . 2>/dev/null
cat $W/times.txt; ls $W/ncu_csv; tail -4 $W/search.log; sed -n '/^| target/,/^$/p' $W/search/search_compare.md | cut -c1-600
