import json, random, subprocess, re, glob, os
random.seed(7)
exprs=[]
for f in sorted(glob.glob('/work/shared/promqltest/*.test')):
    for line in open(f):
        m=re.match(r'^eval\w* (?:instant at \S+|range from \S+ to \S+ step \S+) (.*)$', line.rstrip('\n'))
        if m: exprs.append(m.group(1))
exprs += json.load(open('parse_test_ok_inputs.json'))
exprs = list(dict.fromkeys(exprs))
data='\n'.join(json.dumps(q, ensure_ascii=False) for q in exprs)+'\n'
env=dict(os.environ, PARSE_JSON='1')
a=subprocess.run(['./parseoracle'],input=data.encode(),capture_output=True,env=env).stdout.decode().splitlines()
b=subprocess.run(['./mine'],input=data.encode(),capture_output=True,env=env).stdout.decode().splitlines()
def shape(j, acc):
    if isinstance(j, dict):
        t=j.get('type')
        if t: acc.add(t + ':' + str(j.get('op','')))
        for k,v in j.items():
            if v not in (None, False, 0, [], '') and k in ('rangeExpr','offsetExpr','stepExpr','startOrEnd','timestamp','anchored','smoothed','matching','param','without','bool'): acc.add(k)
            shape(v, acc)
    elif isinstance(j, list):
        for v in j: shape(v, acc)
seen=set(); out=[]; diff=0
items=list(zip(exprs,a,b)); random.shuffle(items)
for q,x,y in items:
    x=json.loads(x)
    if 'json' not in x: continue
    if x!=json.loads(y): diff+=1; continue
    acc=set(); shape(x['json'], acc)
    new = acc - seen
    if new or len(out) < 60 and random.random() < 0.05:
        seen |= acc; out.append({'q':q,'json':x['json']})
print('candidates', len(exprs), 'diff', diff, 'golden', len(out))
with open('upstream_json_golden.jsonl','w') as f:
    for o in out: f.write(json.dumps(o, ensure_ascii=False, sort_keys=True)+'\n')
