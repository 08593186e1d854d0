#!/bin/bash
# Issue 14's targets (size on disk after every fill at most RocksDB's; R4-io and T1 reads
# 1.2x RocksDB) at seed-full size, ShaleDB and RocksDB in one sitting, nothing else running.
# BIN: shale-bench built with `cargo build --release -p shaledb-bench --features peers`.
BIN=${BIN:-/tmp/sb-main}
OUT=${OUT:-bench/results/2026-11-28-seed-full-vs-rocksdb}
set -e
$BIN compare --suite=seed-full --engines=shaledb,rocksdb --db_bench=0 --dir=$OUT \
  --only=R1,R2,R3,R4,R5,R6,R7,T1
$BIN compare --suite=seed-full --engines=shaledb,rocksdb --db_bench=0 --dir=$OUT \
  --only=K1-100KB,K1-256KB,K1-512KB,K1-1MB,K1-1KB,K1-100B --append=1
