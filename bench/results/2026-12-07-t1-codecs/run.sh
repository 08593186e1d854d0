#!/bin/bash
# T1's load at seed-full size (5M lineitem rows) with stronger compression, ShaleDB alone,
# and RocksDB's default T1 for the reference: the size on disk once the load is flushed and
# compacted (the `tpch` line). Usage: run.sh SHALE_BENCH [ROWS]
BIN=${1:-shale-bench}; ROWS=${2:-5000000}
T1="--rows=$ROWS --readers=0 --cache_size=8388608"
DICT="--compression_max_dict_bytes=16384 --compression_zstd_max_train_bytes=1638400"
DICT64="--compression_max_dict_bytes=65536 --compression_zstd_max_train_bytes=6553600"
CONFIGS=(
  "rocksdb"
  "shaledb"
  "shaledb --compression_type=zstd"
  "shaledb --compression_type=zstd $DICT"
  "shaledb --compression_type=zstd --compression_level=19 $DICT"
  "shaledb --compression_type=zstd $DICT --block_size=16384"
  "shaledb --compression_type=zstd $DICT64 --block_size=65536"
  "shaledb --compression_type=zstd --compression_level=19 $DICT64 --block_size=65536"
)
for c in "${CONFIGS[@]}"; do
  set -- $c; engine=$1; shift
  D=/tmp/t1-codecs-$engine; rm -rf $D
  echo "# $engine $* $(date -u +%T)"
  $BIN tpch $T1 "$@" --engine=$engine --db=$D 2>&1 | grep -E '^tpch(-write| ) |^tpch-read-loaded'
  rm -rf $D
done
