import os, mmap, random, time, sys, glob
files=sorted(glob.glob('/tmp/r4/shaledb/*.sst'))
fds=[(os.open(f, os.O_RDONLY|os.O_DIRECT), os.path.getsize(f)) for f in files]
buf=mmap.mmap(-1, 1<<16)
def run(align, n=4000, blk=4900, seed=1):
    rnd=random.Random(seed)
    t=time.perf_counter(); tot=0
    for _ in range(n):
        fd,sz=rnd.choice(fds)
        off=rnd.randrange(0, sz-blk-8192)
        start=off-off%align
        end=off+blk; end=(end+align-1)//align*align
        tot+=os.preadv(fd,[memoryview(buf)[:end-start]],start)
    dt=time.perf_counter()-t
    return dt/n*1e6, tot/n
for a in [4096,512,4096,512]:
    print(a, "%.1f us/read, %.0f bytes" % run(a, seed=a))
