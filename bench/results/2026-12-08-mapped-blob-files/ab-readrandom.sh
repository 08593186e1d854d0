#!/bin/bash
# K1-1KB readrandom at seed-full size (1 GiB of 1,000-byte values in blob files, 8 MB block
# cache, no bloom filter), one database filled once, read by two binaries in alternation,
# with table and blob files mapped (--mmap_read=1) and without (the default).
# Usage: ab-readrandom.sh BEFORE AFTER PAIRS
BEFORE=$1 AFTER=$2 PAIRS=${3:-4}
vs=1000; num=$(( (1<<30) / vs ))
K="--num=$num --reads=1000000 --key_size=16 --value_size=$vs --write_buffer_size=4194304 --cache_size=8388608 --bloom_bits=0 --compression_ratio=0.5 --min_blob_size=512 --enable_blob_files=1 --engine=shaledb --db=/tmp/k1kb-ab"
rm -rf /tmp/k1kb-ab
$AFTER $K --benchmarks=fillrandom | grep micros/op
for m in 1 0; do
  for p in $(seq $PAIRS); do
    if [ $((p % 2)) = 1 ]; then order="before after"; else order="after before"; fi
    for side in $order; do
      bin=$BEFORE; [ $side = after ] && bin=$AFTER
      echo -n "mmap_read=$m pair=$p $side "
      $bin $K --use_existing_db=1 --mmap_read=$m --benchmarks=readrandom | grep micros/op
    done
  done
done
rm -rf /tmp/k1kb-ab
