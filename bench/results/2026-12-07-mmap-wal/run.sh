#!/bin/bash
for p in 1 2 3 4; do
if [ $((p % 2)) = 1 ]; then order="b:s37 n:mmap4"; else order="n:mmap4 b:s37"; fi
for x in $order; do
  name=p$p${x%%:*}; bin=/tmp/sb-${x##*:}
  rm -rf /tmp/ab38c/$name
  $bin compare --suite=seed-medium --engines=shaledb --db_bench=0 --only=R3,R4-1t,R5,R7,K1-100B,K1-1KB,K1-100KB,Y1-2t --dir=/tmp/ab38c/$name > /tmp/ab38c/$name.log 2>&1
  rm -rf /tmp/ab38c/$name/raw
done; done
echo done > /tmp/ab38c/done
