#!/bin/bash
# fs.sh BIN ENGINE [extra]: R4's fillseq (800 B values, no compression, 4 KB blocks, WAL on)
BIN=$1; E=$2; shift 2
D=/tmp/fsdb-$E; rm -rf $D
$BIN --num=1000000 --key_size=10 --value_size=800 --compression_ratio=0.5 --compression_type=none --block_size=4096 --bloom_bits=10 --cache_size=1073741824 --benchmarks=fillseq --threads=1 --engine=$E --db=$D "$@" 2>&1 | grep -E '^fillseq'
rm -rf $D
