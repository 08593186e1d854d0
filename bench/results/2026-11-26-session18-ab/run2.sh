#!/bin/bash
# R4/R1-bulk: base, new, new with bytes_per_sync=0 (via a wrapper flag is not possible in compare; use db_bench mode)
set -e
R4="--num=1000000 --key_size=10 --value_size=800 --compression_ratio=0.5 --bloom_bits=10 --cache_size=1073741824 --compression_type=none --block_size=4096"
for i in 1 2 3; do
  for v in base new new0; do
    b=$v; extra=""
    if [ $v = new0 ]; then b=new; extra="--bytes_per_sync=0"; fi
    rm -rf /tmp/ab18/db; sync; sleep 1
    /tmp/sb-$b $R4 --benchmarks=fillseq --threads=1 $extra --db=/tmp/ab18/db 2>&1 | grep -E "^fillseq +:.*micros" | sed "s/^/$v /"
    /tmp/sb-$b $R4 --benchmarks=readrandom --threads=2 --reads=500000 --use_existing_db=1 $extra --db=/tmp/ab18/db 2>&1 | grep -E "^readrandom +:.*micros" | sed "s/^/$v /"
  done
done
