#!/usr/bin/env python3
"""Medians of the alternated before/after compare runs. usage: ab2.py RUNS_DIR (holding p1b, p1n, ...)"""
import json, sys, statistics, glob
def load(d):
    rows = {}
    for c in json.load(open(d + '/results.json')):
        seen = {}
        for r in c.get('results') or []:
            b = r['benchmark']; seen[b] = seen.get(b, 0) + 1
            rows[(c['workload'], b + ('' if seen[b] == 1 else f' ({seen[b]})'))] = r['ops_per_sec']
    return rows
B = [load(d) for d in sorted(glob.glob(sys.argv[1] + '/p*b'))]; A = [load(d) for d in sorted(glob.glob(sys.argv[1] + '/p*n'))]
print(f'{len(B)} before runs, {len(A)} after runs, alternated')
print('| workload | benchmark | median before | median after | after / before | pairs after faster |')
print('| --- | --- | ---: | ---: | ---: | ---: |')
for k in A[0]:
    b = [r[k] for r in B if k in r]; a = [r[k] for r in A if k in r]
    wins = sum(1 for x, y in zip(b, a) if y > x)
    print(f'| {k[0]} | {k[1]} | {statistics.median(b):,.0f} | {statistics.median(a):,.0f} | {statistics.median(a)/statistics.median(b):.2f}x | {wins} of {min(len(a),len(b))} |')
