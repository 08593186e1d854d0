#!/bin/bash
for p in 1 2 3 4 5 6 7 8; do
for x in b:s36 n:blobra3; do
  name=p$p${x%%:*}; bin=/tmp/sb-${x##*:}
  rm -rf /tmp/ab37/$name
  $bin compare --suite=seed-medium --engines=shaledb --db_bench=0 --only=K1-1KB,K1-100KB,K1-256KB --dir=/tmp/ab37/$name > /tmp/ab37/$name.log 2>&1
  rm -rf /tmp/ab37/$name/raw
done; done
echo done > /tmp/ab37/done2
