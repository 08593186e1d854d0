#!/bin/bash
set -e
for i in "$@"; do
  for b in base new; do
    sync; sleep 2
    /tmp/sb-$b compare --suite=seed-medium --engines=shaledb --db_bench=0 --only=R1-bulk,R4-1t,R4-2t,R4-32t --dir=/tmp/ab18/r4-$b$i > /tmp/ab18/r4-$b$i.log 2>&1
  done
done
