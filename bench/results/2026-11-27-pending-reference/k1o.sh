#!/bin/bash
# k1o.sh BIN ENGINE VS [flags]: K1 fillrandom,overwrite at 1 GiB of values of VS bytes
BIN=$1; E=$2; VS=$3; shift 3
D=/tmp/k1o-$E; rm -rf $D
X=""; [ $E = shaledb ] && X="--enable_blob_files=1"
$BIN --num=$(( (1<<30) / VS )) --key_size=16 --value_size=$VS --write_buffer_size=4194304 --cache_size=8388608 --bloom_bits=0 --compression_ratio=0.5 --min_blob_size=512 $X --benchmarks=fillrandom,overwrite --engine=$E --db=$D "$@" 2>&1 | grep -E '^(fill|over)' | sed 's/(size on disk.*//;s/; space-amp.*//'
rm -rf $D
