#!/bin/bash
# base: shale-bench of 7ba695e (/tmp/sb-snap), new: of 839e964 (/tmp/sb-ent); K1 rows only
for x in n3:ent b3:snap b4:snap n4:ent; do
  name=${x%%:*}; bin=/tmp/sb-${x##*:}
  rm -rf ${DIR:-/tmp/ab}/$name
  $bin compare --suite=seed-medium --engines=shaledb --db_bench=0 --only=K1-100B,K1-1KB,K1-100KB,K1-256KB,K1-512KB,K1-1MB --dir=${DIR:-/tmp/ab}/$name > ${DIR:-/tmp/ab}/$name.log 2>&1
done
