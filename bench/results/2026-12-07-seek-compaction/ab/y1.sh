#!/bin/bash
for x in b6:s35 n6:new n7:new b7:s35 b8:s35 n8:new n9:new b9:s35; do
  name=${x%%:*}; bin=/tmp/sb-${x##*:}
  rm -rf /tmp/ab36/$name
  echo "$name $(date -u +%T)" >> /tmp/ab36/times3.txt
  $bin compare --suite=seed-medium --engines=shaledb --db_bench=0 --only=Y1-8t,Y1-2t,R4-2t --dir=/tmp/ab36/$name > /tmp/ab36/$name.log 2>&1
done
echo "done $(date -u +%T)" >> /tmp/ab36/times3.txt
