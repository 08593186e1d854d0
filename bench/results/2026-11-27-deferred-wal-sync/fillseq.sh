#!/bin/bash
# usage: fillseq.sh BIN ENGINE [extra flags]
BIN=$1; ENG=$2; shift 2
D=/work/tmp/fs-db; rm -rf $D
/usr/bin/time -f "%e s wall %U user %S sys %M KB" $BIN --engine=$ENG --db=$D --num=1000000 --key_size=10 --value_size=800 --compression_ratio=0.5 --compression_type=none --block_size=4096 --bloom_bits=10 --cache_size=1073741824 --benchmarks=fillseq --threads=1 "$@" 2>&1 | grep -E "fillseq|wall"
rm -rf $D
