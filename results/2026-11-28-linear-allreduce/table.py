import glob,re,collections,statistics,sys
d=collections.defaultdict(list)
for f in glob.glob(sys.argv[1]+'/*.log'):
    name=re.sub(r'\.r\d+\.log$','',f.split('/')[-1])
    for l in open(f):
        x=l.split()
        if len(x)==6 and x[0].isdigit(): d[(name,int(x[0]))].append(float(x[2]))
names=sorted({k[0] for k in d}); sizes=sorted({k[1] for k in d})
print('size', *names)
for s in sizes:
    print(s, *[f"{statistics.median(d[(n,s)]):.1f}[{min(d[(n,s)]):.1f}-{max(d[(n,s)]):.1f}]" for n in names])
