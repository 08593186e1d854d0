#!/bin/bash
# What compressing L0 and L1 costs and saves: R1's load at seed-medium size (1M keys, 800-byte
# values that compress to half, WAL off) then 300,000 random reads, for ShaleDB with
# each codec on every level and with the levels above L2 uncompressed (the library's default
# leaves L0 and L1 uncompressed), and RocksDB with its default (snappy on every level).
# Configurations run in one order, then in the reverse order. Usage: run.sh SHALE_BENCH [N]
BIN=${1:-shale-bench}; N=${2:-1000000}
BASE="--num=$N --key_size=10 --value_size=800 --compression_ratio=0.5 --bloom_bits=10 --cache_size=1073741824 --disable_wal=1 --reads=300000 --benchmarks=fillrandom,readrandom"
CONFIGS=(
  "shaledb --compression_type=snappy"
  "shaledb --compression_type=snappy --min_level_to_compress=2"
  "shaledb --compression_type=lz4"
  "shaledb --compression_type=lz4 --min_level_to_compress=2"
  "rocksdb --compression_type=snappy"
)
run() {
  set -- $1
  local engine=$1; shift
  local D=/tmp/upper-codecs-$engine; rm -rf $D
  echo "# $engine $* $(date -u +%T)"
  $BIN $BASE "$@" --engine=$engine --db=$D --json=/tmp/upper-codecs.json 2>&1 | grep -E 'micros/op'
  python3 -c "import json;r=json.load(open('/tmp/upper-codecs.json'))['results'][0];print('  size_on_disk=%.1f MiB write_amp=%.2f space_amp=%.2f' % (r['size_on_disk']/2**20, r['write_amp'], r['space_amp']))"
  rm -rf $D
}
for c in "${CONFIGS[@]}"; do run "$c"; done
for ((i=${#CONFIGS[@]}-1; i>=0; i--)); do run "${CONFIGS[$i]}"; done
