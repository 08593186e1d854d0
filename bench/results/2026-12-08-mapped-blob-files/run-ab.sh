#!/bin/bash
# Alternated before/after seed-medium runs (ShaleDB only) of the rows that read blocks the
# cache does not hold: b = /tmp/sb-s38m (377722b), n = /tmp/sb-s39b (714f92e).
for p in ${PAIRS:-1 2 3 4 5 6}; do
if [ $((p % 2)) = 1 ]; then order="b:s38m n:s39b"; else order="n:s39b b:s38m"; fi
for x in $order; do
  name=p$p${x%%:*}; bin=/tmp/sb-${x##*:}
  rm -rf /tmp/ab39/$name
  $bin compare --suite=seed-medium --engines=shaledb --db_bench=0 --only=R4-2t,R4-32t,R5,K1-100B,K1-1KB,Y1-8t --dir=/tmp/ab39/$name > /tmp/ab39/$name.log 2>&1
  rm -rf /tmp/ab39/$name/raw
done; done
echo done > /tmp/ab39/done
