#!/bin/bash
# The rows of the session 40 five-engine report more than 5% below session 39's, ShaleDB
# only, alternated: b = /tmp/sb-base40 (f484e65 rebuilt), n = /tmp/sb-s40d (61ef39a).
# Usage: run-ab.sh PAIRS; then ../2026-12-08-mapped-blob-files/ab2.py /tmp/ab40
for p in $(seq ${1:-3}); do
if [ $((p % 2)) = 1 ]; then order="b:base40 n:s40d"; else order="n:s40d b:base40"; fi
for x in $order; do
  name=p$p${x%%:*}; bin=/tmp/sb-${x##*:}
  rm -rf /tmp/ab40/$name
  $bin compare --suite=seed-medium --engines=shaledb --db_bench=0 --only=K1-100KB,K1-512KB,K1-1MB,R4-32t,R6-2t,R7,T1,Y1-2t,Y1-8t --dir=/tmp/ab40/$name > /tmp/ab40/$name.log 2>&1
  rm -rf /tmp/ab40/$name/raw
done; done
