#!/bin/bash
# K1-100KB fills then overwrite (ShaleDB), with /proc/meminfo Dirty and Writeback sampled every 0.5 s.
B=${BIN:-/tmp/sb-new2}
for i in 1 2 3; do
  rm -rf /tmp/k1r
  ( while true; do echo "$(date +%s.%N | cut -c1-14) $(grep -E '^(Dirty|Writeback):' /proc/meminfo | awk '{printf "%s %d ", $1, $2/1024}')"; sleep 0.5; done ) > /tmp/dirty.$i.log &
  P=$!
  $B --num=10737 --key_size=16 --value_size=100000 --write_buffer_size=4194304 --cache_size=8388608 --bloom_bits=0 --compression_ratio=0.5 --enable_blob_files=1 --min_blob_size=512 --separate_blobs_at_write=1 --benchmarks=fillseq,fillrandom,overwrite --engine=shaledb --db=/tmp/k1r 2>&1 | grep "micros/op" | sed "s/^/run $i $(date +%s) /"
  kill $P
done
rm -rf /tmp/k1r
