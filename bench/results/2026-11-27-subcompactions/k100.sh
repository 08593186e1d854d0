#!/bin/bash
# k100.sh BIN ENGINE SUBCOMPACTIONS: K1's 100-byte values at seed-full size (1 GiB of values),
# fillrandom then overwrite, with --subcompactions=N.
BIN=$1; E=$2; N=$3
D=/tmp/k100-$E; rm -rf $D
X=""; [ $E = shaledb ] && X="--enable_blob_files=1"
$BIN --num=10737418 --key_size=16 --value_size=100 --write_buffer_size=4194304 --cache_size=8388608 --bloom_bits=0 --compression_ratio=0.5 --min_blob_size=512 $X --subcompactions=$N --benchmarks=fillrandom,overwrite,stats --engine=$E --db=$D 2>&1 | grep -E '^(fillrandom|overwrite) .*micros|Write stalls' | sed 's/(size on disk.*//'
rm -rf $D
