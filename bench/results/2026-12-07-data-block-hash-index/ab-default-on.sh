#!/bin/bash
for p in 1 2 3; do
for x in b:blobra3 n:hash; do
  name=p$p${x%%:*}; bin=/tmp/sb-${x##*:}
  rm -rf /tmp/ab-on/$name
  echo "$name $(date -u +%T)" >> /tmp/ab-on/times.txt
  $bin compare --suite=seed-medium --engines=shaledb --db_bench=0 --only=R4-1t,R4-2t,R4-32t,R7,K1-1KB,K1-100B --dir=/tmp/ab-on/$name > /tmp/ab-on/$name.log 2>&1
  rm -rf /tmp/ab-on/$name/raw
done; done
echo "done $(date -u +%T)" >> /tmp/ab-on/times.txt
