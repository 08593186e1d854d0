#!/bin/bash
set -e
for i in "$@"; do
  for b in new par; do
    sync; sleep 2
    /tmp/sb-$b compare --suite=seed-medium --engines=shaledb --db_bench=0 --only=K1-100B,K1-1KB,K1-100KB,K1-256KB,K1-512KB,K1-1MB --dir=/tmp/ab18/k1-$b$i > /tmp/ab18/k1-$b$i.log 2>&1
  done
done
