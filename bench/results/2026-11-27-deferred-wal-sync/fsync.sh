#!/bin/bash
# usage: fsync.sh BIN DIR : db_bench fillsync, 5000 synced writes of 800 B, 1 thread (R6-1t x5)
rm -rf $2; $1 --engine=shaledb --db=$2 --num=1000000 --key_size=10 --value_size=800 --compression_ratio=0.5 --compression_type=snappy --bloom_bits=10 --cache_size=1073741824 --benchmarks=fillsync --threads=1 --writes=5000 > /dev/null; rm -rf $2
