#!/bin/bash
# K1 rows, ShaleDB, flush-time vs write-time blob separation, alternating.
B=/work/main/target/release/shale-bench
for round in 1 2; do
for spec in "1000 52428" "100000 524" "262144 200" "524288 100" "1048576 50"; do
  set -- $spec
  for sep in 0 1; do
    rm -rf /tmp/k1ab
    echo "== value $1 sep $sep round $round"
    $B --num=$2 --key_size=16 --value_size=$1 --write_buffer_size=4194304 --cache_size=8388608 --bloom_bits=0 --compression_ratio=0.5 --enable_blob_files=1 --min_blob_size=512 --benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,compact,readrandom,readseq --engine=shaledb --db=/tmp/k1ab --separate_blobs_at_write=$sep 2>&1 | grep -E "ops/sec" | awk '{print $1, $5}' | tr '\n' ' '
    echo
  done
done
done
rm -rf /tmp/k1ab
