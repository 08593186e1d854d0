#!/bin/bash
# k1r.sh BIN VS [flags]: ShaleDB, K1's flags with blob files, 1 GiB of values of VS bytes:
# fillrandom, overwrite, then readrandom of 1M keys in the same process.
BIN=$1; VS=$2; shift 2
D=/tmp/k1r-db; rm -rf $D
$BIN --num=$(( (1<<30) / VS )) --reads=1000000 --key_size=16 --value_size=$VS --write_buffer_size=4194304 --cache_size=8388608 --bloom_bits=0 --compression_ratio=0.5 --min_blob_size=512 --enable_blob_files=1 --benchmarks=fillrandom,overwrite,readrandom --db=$D "$@" 2>&1 | grep -E 'micros|size on disk' | sed 's/; space-amp.*//'
ls -l $D/*.sst | awk '{s+=$5} END {print "tables: " s " bytes"}'
rm -rf $D
