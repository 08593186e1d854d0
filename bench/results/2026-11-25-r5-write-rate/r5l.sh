#!/bin/bash
bin=$1; engine=$2; shift 2
B="--num=1000000 --key_size=10 --value_size=800 --compression_ratio=0.5 --compression_type=snappy --bloom_bits=10 --cache_size=1073741824"
rm -rf /tmp/r5db
$bin $B --engine=$engine --db=/tmp/r5db --benchmarks=fillseq --threads=1 >/dev/null 2>&1
sync; sleep 1
$bin $B --engine=$engine --db=/tmp/r5db --benchmarks=readwhilewriting --threads=2 --reads=500000 --use_existing_db=1 "$@" 2>&1 | grep -E '^readwhilewriting +:.*ops/sec' | sed 's/.*micros\/op//'
