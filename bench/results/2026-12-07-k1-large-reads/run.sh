#!/bin/bash
# K1 readrandom at 100 KB and 1 MB with 20x the suite's reads, ShaleDB against fjall (the best
# peer on these rows). Each engine loads once (fillrandom, overwrite: the state compare's first
# readrandom sees), then reads twice, engines alternating. Usage: run.sh SHALE_BENCH
BIN=${1:-shale-bench}
for vs in 102400 1048576; do
  num=$(( (1<<30) / vs ))
  C="--num=$num --key_size=16 --value_size=$vs --write_buffer_size=4194304 --cache_size=8388608 --bloom_bits=0 --compression_ratio=0.5 --enable_blob_files=1 --min_blob_size=512 --separate_blobs_at_write=1"
  for e in shaledb fjall; do
    X=""; [ $e = fjall ] && X="--compression_type=lz4"
    rm -rf /tmp/k1reads-$e
    echo "# value_size=$vs engine=$e load"
    $BIN $C $X --benchmarks=fillrandom,overwrite --engine=$e --db=/tmp/k1reads-$e 2>&1 | grep micros/op
  done
  for run in 1 2; do
    for e in shaledb fjall; do
      X=""; [ $e = fjall ] && X="--compression_type=lz4"
      echo "# value_size=$vs engine=$e reads run $run"
      $BIN $C $X --use_existing_db=1 --reads=$(( num * 20 )) --benchmarks=readrandom \
        --engine=$e --db=/tmp/k1reads-$e 2>&1 | grep micros/op
    done
  done
  rm -rf /tmp/k1reads-shaledb /tmp/k1reads-fjall
done
