#!/bin/bash
for p in 1 2 3 4; do
for x in b:blobra3 n:hash4; do
  name=p$p${x%%:*}; bin=/tmp/sb-${x##*:}
  rm -rf /tmp/ab-off/$name
  $bin compare --suite=seed-medium --engines=shaledb --db_bench=0 --only=K1-100B,Y1-2t,R4-1t --dir=/tmp/ab-off/$name > /tmp/ab-off/$name.log 2>&1
  rm -rf /tmp/ab-off/$name/raw
done; done
echo "done $(date -u +%T)" >> /tmp/ab-off/times.txt
