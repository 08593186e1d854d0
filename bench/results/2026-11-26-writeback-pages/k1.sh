#!/bin/sh
# k1.sh BIN DIR: K1-1KB's commands of seed-medium on a fresh directory
rm -rf "$2"
exec "$1" --num=52428 --key_size=16 --value_size=1000 --write_buffer_size=4194304 --cache_size=8388608 --bloom_bits=0 --compression_ratio=0.5 --enable_blob_files=1 --min_blob_size=512 --benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,compact,readrandom,readseq --engine=shaledb --db="$2"
