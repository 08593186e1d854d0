#!/bin/bash
# K1 at seed-full size (1 GiB of values) for the KingDB rows: 100 B values (in the tables) and
# 1 KB values (blob files), fillrandom, overwrite, readrandom; LevelDB once (it always maps
# its tables), then ShaleDB with its defaults and ShaleDB with table and blob files mapped
# (--mmap_read=1). Usage: kingdb-rows.sh BIN
BIN=$1
for vs in 100 1000; do
  num=$(( (1<<30) / vs ))
  K="--num=$num --reads=1000000 --key_size=16 --value_size=$vs --write_buffer_size=4194304 --cache_size=8388608 --bloom_bits=0 --compression_ratio=0.5 --min_blob_size=512 --benchmarks=fillrandom,overwrite,readrandom"
  for run in leveldb shaledb shaledb-mmap; do
    engine=${run%-mmap}
    D=/tmp/kingdb-$engine; rm -rf $D
    X=""; [ $engine = shaledb ] && X="--enable_blob_files=1"
    [ $run = shaledb-mmap ] && X="$X --mmap_read=1"
    echo "# value_size=$vs run=$run $(date -u +%T)"
    $BIN $K $X --engine=$engine --db=$D 2>&1 | grep -E 'micros/op'
    rm -rf $D
  done
done
