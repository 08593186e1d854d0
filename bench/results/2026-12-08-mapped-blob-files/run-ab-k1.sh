#!/bin/bash
# The K1-100B and K1-1KB rows again, alternated: b = /tmp/sb-377 (377722b built in this
# session with the same command), n = /tmp/sb-s39b (714f92e).
for p in 1 2 3 4 5 6; do
if [ $((p % 2)) = 1 ]; then order="b:377 n:s39b"; else order="n:s39b b:377"; fi
for x in $order; do
  name=p$p${x%%:*}; bin=/tmp/sb-${x##*:}
  rm -rf /tmp/ab39c/$name
  $bin compare --suite=seed-medium --engines=shaledb --db_bench=0 --only=K1-100B,K1-1KB --dir=/tmp/ab39c/$name > /tmp/ab39c/$name.log 2>&1
  rm -rf /tmp/ab39c/$name/raw
done; done
