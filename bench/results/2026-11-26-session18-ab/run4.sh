#!/bin/bash
set -e
for i in "$@"; do
  for v in new0 base new; do
    b=$v; extra=""
    if [ $v = new0 ]; then b=new; extra="--bytes_per_sync=0"; fi
    sync; sleep 2
    /tmp/sb-$b compare --suite=seed-medium --engines=shaledb --db_bench=0 --only=R1-bulk,R4-1t,R4-2t --extra="$extra" --dir=/tmp/ab18/r4b-$v$i > /tmp/ab18/r4b-$v$i.log 2>&1
  done
done
