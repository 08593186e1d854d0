#!/bin/bash
for p in 1 2 3; do
if [ $((p % 2)) = 1 ]; then order="b:s37 n:s38"; else order="n:s38 b:s37"; fi
for x in $order; do
  name=p$p${x%%:*}; bin=/tmp/sb-${x##*:}
  rm -rf /tmp/ab38d/$name
  $bin compare --suite=seed-medium --engines=shaledb --db_bench=0 --only=K1-256KB,K1-512KB,Y1-8t,R6-2t --dir=/tmp/ab38d/$name > /tmp/ab38d/$name.log 2>&1
  rm -rf /tmp/ab38d/$name/raw
done; done
echo done > /tmp/ab38d/done
