#!/bin/bash
set -x
for x in b1:head n1:new n2:new b2:head; do
  name=${x%%:*}; bin=/tmp/sb-${x##*:}
  rm -rf ${DIR:-/tmp/ab}/$name
  $bin compare --suite=seed-medium --engines=shaledb --db_bench=0 --dir=${DIR:-/tmp/ab}/$name > ${DIR:-/tmp/ab}/$name.log 2>&1
done
echo done
