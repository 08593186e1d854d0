#!/bin/bash
# k1m.sh BIN ENGINE VS [flags]: compare's seed-medium K1 cell (50 MB of values)
BIN=$1; E=$2; VS=$3; shift 3
D=/tmp/k1m-$E; rm -rf $D
X="--enable_blob_files=1"; [ $E = leveldb ] && X="--enable_blob_files=0"
$BIN --num=$(( (50<<20) / VS )) --key_size=16 --value_size=$VS --write_buffer_size=4194304 --cache_size=8388608 --bloom_bits=0 --compression_ratio=0.5 --min_blob_size=512 $X --benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,compact,readrandom,readseq --engine=$E --db=$D "$@" 2>&1 | grep -E 'micros/op' | awk '{printf "%s %s  ", $1, $5} END {print ""}'
rm -rf $D
