#!/bin/bash
set -e
for i in "$@"; do
  for b in new base; do
    sync; sleep 2
    /tmp/sb-$b compare --suite=seed-medium --engines=shaledb --db_bench=0 --only=T1,T1-dict --dir=/tmp/ab18/t1-$b$i > /tmp/ab18/t1-$b$i.log 2>&1
  done
done
