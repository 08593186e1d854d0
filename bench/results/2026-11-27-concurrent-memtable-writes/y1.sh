#!/usr/bin/env bash
# y1.sh BIN THREADS: Y1's load (1M records, 8-byte keys, one 24-byte field), ops/s
BIN=$1; T=$2; D=/tmp/y1ab-$$
rm -rf $D
$BIN ycsb --engine=shaledb --workload=a --phase=load --recordcount=1000000 --threads=$T --fixedkey8b --fieldcount=1 --fieldlength=24 --cache_size=268435456 --db=$D 2>&1 | awk -F'|' '/\| shaledb \|/{gsub(/[ ,]/,"",$4); print $4}'
rm -rf $D
