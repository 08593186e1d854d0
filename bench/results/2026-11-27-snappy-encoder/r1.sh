#!/bin/bash
# r1.sh BIN: R1 (fillrandom of 1M 800-byte values, snappy, WAL off), then waits for compactions
BIN=$1; D=/work/tmp/r1-db-$$; rm -rf $D
$BIN --engine=shaledb --db=$D --num=1000000 --key_size=10 --value_size=800 --compression_ratio=0.5 --compression_type=snappy --bloom_bits=10 --cache_size=1073741824 --benchmarks=fillrandom --disable_wal=1 2>&1 | grep -E "micros"
rm -rf $D
