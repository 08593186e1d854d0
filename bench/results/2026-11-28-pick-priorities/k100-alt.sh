#!/bin/bash
K="--num=10737418 --reads=1000000 --key_size=16 --value_size=100 --write_buffer_size=4194304 --cache_size=8388608 --bloom_bits=0 --compression_ratio=0.5 --min_blob_size=512 --benchmarks=fillrandom,overwrite,readrandom"
for i in 1 2 3; do for e in leveldb shaledb; do
  rm -rf /tmp/kalt; X=""; [ $e = shaledb ] && X="--enable_blob_files=1"
  echo "# round $i $e $(date -u +%T)"; /tmp/sb-s33 $K $X --engine=$e --db=/tmp/kalt 2>&1 | grep micros/op
done; done; rm -rf /tmp/kalt
