#!/bin/bash
# base: shale-bench of 8847626 (/tmp/sb-s35's engine), new: this session's working tree (/tmp/sb-new)
for x in b1:s35 n1:new n2:new b2:s35; do
  name=${x%%:*}; bin=/tmp/sb-${x##*:}
  rm -rf /tmp/ab36/$name
  echo "$name $(date -u +%T)" >> /tmp/ab36/times.txt
  $bin compare --suite=seed-medium --engines=shaledb --db_bench=0 --dir=/tmp/ab36/$name > /tmp/ab36/$name.log 2>&1
done
echo "done $(date -u +%T)" >> /tmp/ab36/times.txt
