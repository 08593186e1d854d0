#!/bin/bash
# K1-100B and K1-1KB at seed-full size (1 GiB of values per size), ShaleDB and LevelDB in turn,
# fills and a readrandom of 1M keys; compare's K1 flags otherwise.
BIN=${BIN:-/tmp/sb-head}
OUT=${OUT:-.}
for vs in 100 1000; do
  num=$(( (1<<30) / vs ))
  for e in shaledb leveldb; do
    D=/tmp/k1full-$e; rm -rf $D
    X=""; [ $e = shaledb ] && X="--enable_blob_files=1"
    echo "# vs=$vs engine=$e $(date -u +%T)"
    $BIN --num=$num --reads=1000000 --key_size=16 --value_size=$vs --write_buffer_size=4194304 --cache_size=8388608 --bloom_bits=0 --compression_ratio=0.5 --min_blob_size=512 $X --benchmarks=fillseq,fillrandom,overwrite,readrandom --engine=$e --db=$D --json=$OUT/k1-$vs-$e.json 2>&1 | grep -E 'micros|size on disk'
    rm -rf $D
  done
done
