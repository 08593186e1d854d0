#!/bin/bash
# KingDB's fills at seed-full size (1 GiB of values, 4 MiB write buffer, as kingdb-rows.sh in
# ../2026-12-08-mapped-blob-files), before and after, alternated: 1 KB values in blob files
# and 100 B values in the tables, fillrandom then overwrite on one database.
# Usage: ab-fills.sh BEFORE AFTER PAIRS
BEFORE=$1 AFTER=$2 PAIRS=${3:-3}
for p in $(seq 1 "$PAIRS"); do
  for vs in 1000 100; do
    num=$(( (1<<30) / vs ))
    K="--num=$num --key_size=16 --value_size=$vs --write_buffer_size=4194304 --cache_size=8388608 --bloom_bits=0 --compression_ratio=0.5 --min_blob_size=512 --benchmarks=fillrandom,overwrite --engine=shaledb"
    X=""; [ "$vs" = 1000 ] && X="--enable_blob_files=1"
    for bin in "$BEFORE" "$AFTER"; do
      D=/tmp/ab-fills; rm -rf $D
      echo "pair=$p value_size=$vs bin=$(basename "$bin") $($bin $K $X --db=$D 2>&1 | grep -E 'micros/op' | awk '{print $1, $5}' | tr '\n' ' ')"
      rm -rf $D
    done
  done
done
