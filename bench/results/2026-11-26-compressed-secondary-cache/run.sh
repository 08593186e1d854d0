#!/bin/bash
# Compressed secondary cache: R4-io's shape with snappy-compressible values.
B=/tmp/shale-bench-new2
OUT=/tmp/sc
mkdir -p $OUT
COMMON="--num=1000000 --key_size=10 --value_size=800 --compression_ratio=0.5 --compression_type=snappy --block_size=4096 --bloom_bits=10"
rm -rf /tmp/sc-db /tmp/sc-rdb; sync
$B --engine=shaledb --db=/tmp/sc-db $COMMON --benchmarks=fillseq --threads=1 --cache_size=67108864 > $OUT/load-shaledb.txt 2>&1
$B --engine=rocksdb --db=/tmp/sc-rdb $COMMON --benchmarks=fillseq --threads=1 --cache_size=67108864 > $OUT/load-rocksdb.txt 2>&1
RUN="--use_existing_db=1 --benchmarks=readrandom --threads=2 --reads=250000 --use_direct_reads=1"
for r in 1 2 3; do
  sync; $B --engine=shaledb --db=/tmp/sc-db $COMMON $RUN --cache_size=67108864 > $OUT/A-64M-$r.txt 2>&1
  sync; $B --engine=shaledb --db=/tmp/sc-db $COMMON $RUN --cache_size=33554432 --use_compressed_secondary_cache=1 --compressed_secondary_cache_size=33554432 > $OUT/B-32M+32M-$r.txt 2>&1
  sync; $B --engine=shaledb --db=/tmp/sc-db $COMMON $RUN --cache_size=67108864 --use_compressed_secondary_cache=1 --compressed_secondary_cache_size=67108864 > $OUT/C-64M+64M-$r.txt 2>&1
  sync; $B --engine=rocksdb --db=/tmp/sc-rdb $COMMON $RUN --cache_size=67108864 > $OUT/R-64M-$r.txt 2>&1
done
echo done > $OUT/done
