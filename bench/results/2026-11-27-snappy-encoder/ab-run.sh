#!/bin/bash
# base: shale-bench of 1dc16c5 (/tmp/sb-run), new: of 7ba695e's code (/tmp/sb-snap, built before its test)
for x in b1:run n1:snap n2:snap b2:run; do
  name=${x%%:*}; bin=/tmp/sb-${x##*:}
  rm -rf ${DIR:-/tmp/ab}/$name
  $bin compare --suite=seed-medium --engines=shaledb --db_bench=0 --dir=${DIR:-/tmp/ab}/$name > ${DIR:-/tmp/ab}/$name.log 2>&1
done
