#!/bin/bash
# Rows lower than session 38's in the session 39 five-engine report, alternated: b =
# /tmp/sb-377 (377722b rebuilt), n = /tmp/sb-s39b (714f92e). Usage: run-ab-report.sh PAIRS
for p in $(seq ${1:-3}); do
if [ $((p % 2)) = 1 ]; then order="b:377 n:s39b"; else order="n:s39b b:377"; fi
for x in $order; do
  name=p$p${x%%:*}; bin=/tmp/sb-${x##*:}
  rm -rf /tmp/ab39d/$name
  $bin compare --suite=seed-medium --engines=shaledb --db_bench=0 --only=R4-32t,R5,R7,K1-100B --dir=/tmp/ab39d/$name > /tmp/ab39d/$name.log 2>&1
  rm -rf /tmp/ab39d/$name/raw
done; done
