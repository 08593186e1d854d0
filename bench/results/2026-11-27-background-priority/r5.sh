#!/bin/bash
# R5 (seed-medium): fillseq, then readwhilewriting (2 readers, 1 unthrottled writer), for
# ENGINE with --background_cpu_priority=PRIO. Usage: r5.sh BIN ENGINE PRIO
set -e
BIN=$1; ENGINE=$2; PRIO=$3
D=$(mktemp -d /tmp/r5-XXXX)
B="--num=1000000 --key_size=10 --value_size=800 --compression_ratio=0.5 --compression_type=snappy --bloom_bits=10 --cache_size=1073741824 --engine=$ENGINE --db=$D/db"
$BIN $B --benchmarks=fillseq --threads=1 > /dev/null
$BIN $B --benchmarks=readwhilewriting --threads=2 --reads=500000 --use_existing_db=1 --background_cpu_priority=$PRIO | grep "micros/op" | sed "s/^/$ENGINE $PRIO: /"
rm -rf $D
