#!/bin/bash
# base: shale-bench of a089c8b (/tmp/sb-new), new: of 9e46937 (/tmp/sb-tally); K1 rows only
for x in b1:new n1:tally n2:tally b2:new; do
  name=${x%%:*}; bin=/tmp/sb-${x##*:}
  rm -rf ${DIR:-/tmp/ab}/$name
  $bin compare --suite=seed-medium --engines=shaledb --db_bench=0 --only=K1-100B,K1-1KB,K1-100KB,K1-256KB,K1-512KB,K1-1MB --dir=${DIR:-/tmp/ab}/$name > ${DIR:-/tmp/ab}/$name.log 2>&1
done
