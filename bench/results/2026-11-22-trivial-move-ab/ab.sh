#!/bin/bash
# A/B of the trivial-move change on R4-1t and R7 at seed-medium size: old and new binaries alternate, 3 rounds.
O=/tmp/s4/ab
COMMON="--num=1000000 --key_size=10 --value_size=800 --compression_ratio=0.5 --compression_type=snappy --bloom_bits=10 --cache_size=1073741824"
for round in 1 2 3; do
  for bin in s4 tm; do
    B=/tmp/shale-bench-$bin; D=/tmp/s4/abdb; rm -rf $D
    $B $COMMON --compression_type=none --block_size=4096 --benchmarks=fillseq --threads=1 --engine=shaledb --db=$D > $O/r4-$bin-$round.txt 2>&1
    $B $COMMON --compression_type=none --block_size=4096 --benchmarks=readrandom,levelstats --threads=1 --reads=1000000 --use_existing_db=1 --engine=shaledb --db=$D >> $O/r4-$bin-$round.txt 2>&1
    rm -rf $D
    $B $COMMON --benchmarks=fillseq,readseq,readreverse,seekrandom,levelstats --seek_nexts=10 --reads=100000 --engine=shaledb --db=$D > $O/r7-$bin-$round.txt 2>&1
    rm -rf $D
  done
done
echo done > $O/done
