#!/bin/bash
# CPU time and device writes of R1's load at 2M keys, lz4 on every level against L0 and L1
# uncompressed (--min_level_to_compress=2), three alternated pairs. Usage: cpu.sh SHALE_BENCH
BIN=${1:-shale-bench}
B="--num=2000000 --key_size=10 --value_size=800 --compression_ratio=0.5 --bloom_bits=10 --cache_size=1073741824 --disable_wal=1 --benchmarks=fillrandom --engine=shaledb --compression_type=lz4"
for i in 1 2 3; do
  for m in -1 2; do
    rm -rf /tmp/cpu
    echo -n "min_level=$m "
    /usr/bin/time -f "cpu %U user %S sys %e wall" $BIN $B --min_level_to_compress=$m \
      --db=/tmp/cpu --json=/tmp/cpu.json 2>&1 | grep -E "^fillrandom|^cpu" | tr '\n' ' '
    python3 -c "import json;r=json.load(open('/tmp/cpu.json'))['results'][0];print('size %.0f MiB wa %.2f' % (r['size_on_disk']/2**20, r['write_amp']))"
  done
done
rm -rf /tmp/cpu
