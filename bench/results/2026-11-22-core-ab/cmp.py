#!/usr/bin/env python3
"""Before/after and best-peer tables from compare results.json files.
usage: cmp.py BEFORE_DIR AFTER_DIR [COMMITTED_DIR]"""
import json, sys, re
def load(d):
    rows = {}
    for c in json.load(open(d + '/results.json')):
        for r in c.get('results') or []:
            key = (c['workload'], r['benchmark'])
            rows.setdefault(key, {})[c['engine']] = r['ops_per_sec']
    return rows
def cat(w, b):
    m = re.match(r'K1-(\d+)(B|KB|MB)', w)
    if m and m.group(2) != 'B' and (m.group(2) == 'MB' or int(m.group(1)) >= 100):
        return 'large values'
    if b in ('readseq', 'readreverse', 'seekrandom') or b == 'e':
        return 'scans'
    if b.startswith('fill') or b in ('overwrite', 'compact', 'load') or (w == 'T1' and b == 'tpch-write'):
        return 'writes'
    return 'point reads'
before, after = load(sys.argv[1]), load(sys.argv[2])
committed = load(sys.argv[3]) if len(sys.argv) > 3 else {}
print('| workload | benchmark | before ops/s | after ops/s | after/before | committed ShaleDB | after/committed | best peer (after run) | after/best peer |')
print('| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |')
fastest = {}; total = {}; worst = []
for key in sorted(after, key=lambda k: (k[0], k[1])):
    a = after[key].get('shaledb'); b = before.get(key, {}).get('shaledb'); cm = committed.get(key, {}).get('shaledb')
    if a is None: continue
    peers = {e: v for e, v in after[key].items() if e != 'shaledb' and v}
    best = max(peers.items(), key=lambda kv: kv[1]) if peers else None
    f = lambda x: f'{x:,.0f}' if x else '-'
    r = lambda x, y: f'{x / y:.2f}x' if x and y else '-'
    print(f'| {key[0]} | {key[1]} | {f(b)} | {f(a)} | {r(a, b)} | {f(cm)} | {r(a, cm)} | {best[0] + " " + f(best[1]) if best else "-"} | {r(a, best[1]) if best else "-"} |')
    if b and a / b < 0.95: worst.append((key, a / b))
    if best:
        c = cat(*key); total[c] = total.get(c, 0) + 1
        if a >= best[1]: fastest[c] = fastest.get(c, 0) + 1
print()
if total:
    print('Fastest engine (ShaleDB ops/s >= every peer\'s in the after run): ' + ', '.join(f'{c} {fastest.get(c, 0)} of {n}' for c, n in sorted(total.items())) + f'; all {sum(fastest.values())} of {sum(total.values())}')
print('Rows more than 5% below before: ' + (', '.join(f'{k[0]} {k[1]} {v:.2f}x' for k, v in worst) or 'none'))
