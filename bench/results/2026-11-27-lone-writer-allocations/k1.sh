#!/bin/bash
# k1.sh BIN ENGINE: K1-100B's fills (seed-medium flags)
BIN=$1; E=$2; shift 2
D=/tmp/k1db-$E; rm -rf $D
X=""; [ $E = shaledb ] && X="--enable_blob_files=1"
$BIN --num=524288 --key_size=16 --value_size=100 --write_buffer_size=4194304 --cache_size=8388608 --bloom_bits=0 --compression_ratio=0.5 --min_blob_size=512 --benchmarks=fillseq,fillrandom,overwrite $X --engine=$E --db=$D "$@" 2>&1 | grep -E '^(fill|over)' | grep micros
rm -rf $D
