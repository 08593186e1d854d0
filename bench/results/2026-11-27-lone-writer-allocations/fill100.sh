#!/bin/bash
# usage: fill100.sh BIN ENGINE: 2M 100-byte fillseq then fillrandom (K1-100B flags), WAL on
BIN=$1; ENG=$2; shift 2
D=/work/tmp/f100-db; rm -rf $D
X=""; [ $ENG = shaledb ] && X="--enable_blob_files=1"
$BIN --engine=$ENG --db=$D --num=2000000 --key_size=16 --value_size=100 --write_buffer_size=4194304 --cache_size=8388608 --bloom_bits=0 --compression_ratio=0.5 --min_blob_size=512 $X --benchmarks=fillseq,fillrandom "$@" 2>&1 | grep -E "micros"
rm -rf $D
