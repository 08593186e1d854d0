#!/usr/bin/env python3
"""A/B of ShaleDB rows over alternating compare runs. usage: ab.py B1,B2,... A1,A2,... (result dirs)"""
import json, sys, statistics
def load(d):
    rows = {}
    for c in json.load(open(d + '/results.json')):
        if c['engine'] != 'shaledb': continue
        for r in c.get('results') or []:
            rows[(c['workload'], r['benchmark'])] = r['ops_per_sec']
    return rows
B = [load(d) for d in sys.argv[1].split(',')]; A = [load(d) for d in sys.argv[2].split(',')]
f = lambda x: f'{x:,.0f}'
print('| workload | benchmark | before runs (ops/s) | after runs (ops/s) | median after / median before | verdict |')
print('| --- | --- | --- | --- | ---: | --- |')
slower = []; faster = []
for k in sorted(A[0]):
    b = [r[k] for r in B if k in r]; a = [r[k] for r in A if k in r]
    if not b or not a: continue
    ratio = statistics.median(a) / statistics.median(b)
    if max(a) < 0.95 * min(b): v = 'slower in every pair'; slower.append((k, ratio))
    elif min(a) > 1.05 * max(b): v = 'faster in every pair'; faster.append((k, ratio))
    else: v = 'within the spread'
    print(f'| {k[0]} | {k[1]} | {", ".join(map(f, b))} | {", ".join(map(f, a))} | {ratio:.2f}x | {v} |')
print()
print(f'Faster in every run: {len(faster)} rows; slower in every run: {len(slower)} rows: ' + (', '.join(f'{k[0]} {k[1]} {r:.2f}x' for k, r in slower) or 'none'))
