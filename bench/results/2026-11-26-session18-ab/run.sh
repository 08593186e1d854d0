#!/bin/bash
# alternate base/new whole-suite ShaleDB runs
set -e
for i in "$@"; do
  for b in base new; do
    sync; sleep 2
    /tmp/sb-$b compare --suite=seed-medium --engines=shaledb --db_bench=0 --dir=/tmp/ab18/$b$i > /tmp/ab18/$b$i.log 2>&1
  done
done
