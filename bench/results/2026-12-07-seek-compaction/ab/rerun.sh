#!/bin/bash
for x in b3:s35 n3:new n4:new b4:s35 b5:s35 n5:new; do
  name=${x%%:*}; bin=/tmp/sb-${x##*:}
  rm -rf /tmp/ab36/$name
  echo "$name $(date -u +%T)" >> /tmp/ab36/times2.txt
  $bin compare --suite=seed-medium --engines=shaledb --db_bench=0 --only=R1,R5-low,Y1-8t,K1-100B --dir=/tmp/ab36/$name > /tmp/ab36/$name.log 2>&1
done
echo "done $(date -u +%T)" >> /tmp/ab36/times2.txt
