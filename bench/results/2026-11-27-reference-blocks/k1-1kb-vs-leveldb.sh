#!/bin/bash
# K1-1KB at seed-full size (1 GiB of values), as ../2026-11-27-k1-small-values-seed-full/run.sh:
# LevelDB, then ShaleDB with the new and the base binary, then new again.
K="--num=1073741 --reads=1000000 --key_size=16 --value_size=1000 --write_buffer_size=4194304 --cache_size=8388608 --bloom_bits=0 --compression_ratio=0.5 --min_blob_size=512 --benchmarks=fillseq,fillrandom,overwrite,readrandom"
for run in "leveldb /tmp/sb-refs" "shaledb /tmp/sb-refs" "shaledb /tmp/sb-base" "shaledb /tmp/sb-refs"; do
  set -- $run
  D=/tmp/k1full-$1; rm -rf $D
  X=""; [ $1 = shaledb ] && X="--enable_blob_files=1"
  echo "# engine=$1 bin=$2 $(date -u +%T)"
  $2 $K $X --engine=$1 --db=$D 2>&1 | grep -E 'micros/op'
  rm -rf $D
done
