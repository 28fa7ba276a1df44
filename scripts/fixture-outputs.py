#!/usr/bin/env python3
"""Usage: scripts/fixture-outputs.py BINARY OUT.jsonl
       scripts/fixture-outputs.py compare A.jsonl B.jsonl

Runs a compactd binary over the shared fixtures (../shared/fixtures): plan, context and compact of every session
file (extractive), and /v1/compact of every recorded oh-my-pi request; writes one JSON line per
case with volatile fields (ids, timestamps) removed. Two binaries' outputs, compared, show
whether a change kept plans, contexts, entries and served summaries the same (sessions of
format v1 get fresh ids when migrated: `compare` compares modulo ids, each id replaced by the
path index or entry it names, a map keyed by ids by its values)."""
import json,os,re,subprocess,sys,tempfile,glob,time,urllib.request,socket
if sys.argv[1]=='compare':
    ID=re.compile(r'^[0-9a-f]{8}$')
    def modulo_ids(v):
        if isinstance(v,dict):
            if v and all(ID.match(k) for k in v): return sorted(json.dumps(modulo_ids(x),sort_keys=True) for x in v.values())
            return {k:modulo_ids(x) for k,x in v.items() if not (isinstance(x,str) and ID.match(x))}
        if isinstance(v,list): return [modulo_ids(x) for x in v]
        return v
    a=[json.loads(l) for l in open(sys.argv[2])]; b=[json.loads(l) for l in open(sys.argv[3])]
    same=[x==y for x,y in zip(a,b)]
    alike=[modulo_ids(x)==modulo_ids(y) for x,y in zip(a,b)]
    for x,s,m in zip(a,same,alike):
        if not m: print('differs:',x['case'])
    print(f'{len(a)} and {len(b)} cases: {sum(same)} byte-identical, {sum(alike)} identical modulo ids')
    sys.exit(0 if len(a)==len(b) and all(alike) else 1)
binary,out=sys.argv[1],sys.argv[2]
F=os.environ.get('FIXTURES', os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../shared/fixtures'))
sessions=sorted(glob.glob(F+'/*.jsonl')+glob.glob(F+'/pi15/s*.jsonl'))
env=dict(os.environ, COMPACTD_MODELS='extractive', COMPACTD_LOG='error')
env.pop('DATABASE_URL',None)
def strip(v):
    if isinstance(v,dict): return {k:strip(x) for k,x in v.items() if k not in ('id','timestamp','durationMs','latencyMs','recallId','created','created_at')}
    if isinstance(v,list): return [strip(x) for x in v]
    return v
res=[]
with tempfile.TemporaryDirectory() as d:
    env['COMPACTD_DATA_DIR']=d
    for s in sessions:
        for cmd in (['plan',s],['context',s],['compact',s]):
            r=subprocess.run([binary]+cmd,capture_output=True,text=True,env=env,timeout=300)
            try: body=strip(json.loads(r.stdout))
            except Exception: body=r.stdout
            res.append({'case':' '.join(cmd[:1]+[os.path.relpath(s,F)]),'rc':r.returncode,'out':body,'err':r.stderr[-300:] if r.returncode else ''})
    sock=socket.socket(); sock.bind(('127.0.0.1',0)); port=sock.getsockname()[1]; sock.close()
    e=dict(env, COMPACTD_LISTEN=f'127.0.0.1:{port}', COMPACTD_RECALL_RETENTION='0', COMPACTD_CACHE_BYTES='0')
    p=subprocess.Popen([binary,'serve'],env=e,stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)
    for _ in range(200):
        try: urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz',timeout=1); break
        except Exception: time.sleep(0.05)
    for f in sorted(glob.glob(F+'/omp-requests*/*.jsonl')):
        for n,line in enumerate(open(f)):
            rec=json.loads(line); req=rec['request']
            data=json.dumps(req).encode()
            q=urllib.request.Request(f'http://127.0.0.1:{port}/v1/compact',data=data,headers={'content-type':'application/json'})
            try:
                with urllib.request.urlopen(q,timeout=300) as r: body=json.loads(r.read())
                res.append({'case':f'{os.path.relpath(f,F)}:{n}','out':strip(body)})
            except urllib.error.HTTPError as err:
                res.append({'case':f'{os.path.relpath(f,F)}:{n}','status':err.code,'out':err.read().decode()[:300]})
    p.terminate(); p.wait()
with open(out,'w') as o:
    for r in res: o.write(json.dumps(r,sort_keys=True)+'\n')
print(len(res),'cases')
