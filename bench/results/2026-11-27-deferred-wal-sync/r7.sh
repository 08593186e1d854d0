#!/bin/bash
# usage: r7.sh BIN [flags]: R7's fillseq alone (snappy, prepopulate_block_cache)
BIN=$1; shift; D=/work/tmp/r7-db; rm -rf $D
$BIN --engine=shaledb --db=$D --num=1000000 --key_size=10 --value_size=800 --compression_ratio=0.5 --compression_type=snappy --bloom_bits=10 --cache_size=1073741824 --benchmarks=fillseq --prepopulate_block_cache=1 "$@" 2>&1 | grep -o "[0-9]* ops/sec" | head -1
rm -rf $D
