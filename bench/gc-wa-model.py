#!/usr/bin/env python3
# bench/gc-wa-model.py -- the write amplification an ideal cleaner reaches
# under uniform random overwrites (no engine: a model to compare gc_wa with).
# usage: python3 bench/gc-wa-model.py SEGMENTS SLOTS_PER_SEGMENT FILL greedy|costbenefit UPDATES
# Ideal log-structured cleaner under uniform random overwrites: S segments of
# B slots, live data = fill * S * B keys; one open segment; when no free
# segment is left, clean the segment with the fewest live slots (greedy),
# relocating its live keys into the log. WA = (user + relocated) / user.
import random, sys
S, B, fill, policy = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
random.seed(1)
keys = int(fill * S * B)
loc = [None] * keys            # key -> segment
live = [0] * S                 # live count per segment
members = [set() for _ in range(S)]
free = list(range(S))
age = [0] * S
clock = 0
openseg = free.pop(); used = 0
user = reloc = 0
def append(k):
    global openseg, used, clock
    if used == B:
        age[openseg] = clock; clock += 1
        openseg = free.pop() if free else None
        used = 0
        if openseg is None:
            clean()
    old = loc[k]
    if old is not None:
        live[old] -= 1; members[old].discard(k)
    loc[k] = openseg; live[openseg] += 1; members[openseg].add(k); used += 1
def clean():
    global openseg, used, reloc
    cands = [s for s in range(S) if s != openseg and s not in free]
    if policy == 'greedy':
        v = min(cands, key=lambda s: live[s])
    else:  # cost-benefit (LFS): maximize (1-u)*age/(1+u)
        v = max(cands, key=lambda s: (1 - live[s]/B) * (clock - age[s]) / (1 + live[s]/B))
    moving = list(members[v])
    members[v] = set(); live[v] = 0
    openseg = v; used = 0
    for k in moving:
        loc[k] = None
        reloc += 1
        append(k)
for k in range(keys):
    append(k)
user = 0; reloc = 0
for i in range(int(sys.argv[5])):
    append(random.randrange(keys)); user += 1
print(f"{policy} S={S} B={B} fill={fill}: WA={(user+reloc)/user:.3f} (user {user}, relocated {reloc})")
