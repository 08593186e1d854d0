#!/usr/bin/env bash
# readseq.sh BIN DB [flags]: R7's data (1M x 800 B values, 10 B keys, snappy, 1 GB cache) loaded
# once into DB with fillseq if DB does not exist, then four readseq passes over all of it in one
# process (the first fills the block cache; the other three are warm). Prints ops/s per pass.
set -euo pipefail
BIN=$1; DB=$2; shift 2
BASE="--num=1000000 --key_size=10 --value_size=800 --compression_ratio=0.5 --compression_type=snappy --bloom_bits=10 --cache_size=1073741824"
if [ ! -d "$DB" ]; then
    "$BIN" $BASE --benchmarks=fillseq --db="$DB" "$@" >/dev/null
fi
"$BIN" $BASE --benchmarks=readseq,readseq,readseq,readseq --reads=1000000 --use_existing_db=1 \
    --db="$DB" "$@" 2>&1 | awk '/^readseq /{printf "%s ", $5} END {print ""}'
