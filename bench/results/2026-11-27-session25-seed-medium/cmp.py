import json, sys
def table(p):
    out={}
    for c in json.load(open(p)):
        for r in c.get('results') or []:
            if r.get('ops_per_sec') is None: continue
            out.setdefault((c['workload'], r['benchmark']), {})[c['engine']] = r['ops_per_sec']
    return out
a = table(sys.argv[1]); b = table(sys.argv[2]); prev = sys.argv[3]
print(f"| workload | benchmark | ShaleDB ops/s | best peer | ShaleDB / best peer | ShaleDB / {prev} |")
print("| --- | --- | ---: | --- | ---: | ---: |")
fastest = total = 0
for k in sorted(a):
    row = a[k]
    if 'shaledb' not in row: continue
    peers = {e: v for e, v in row.items() if e != 'shaledb'}
    if not peers: continue
    best = max(peers, key=peers.get)
    s = row['shaledb']; total += 1
    if s >= peers[best]: fastest += 1
    old = b.get(k, {}).get('shaledb')
    print(f"| {k[0]} | {k[1]} | {s:,.0f} | {best} {peers[best]:,.0f} | {s/peers[best]:.2f}x | " + (f"{s/old:.2f}x" if old else "") + " |")
print(f"\nShaleDB fastest on {fastest} of {total} rows.")
