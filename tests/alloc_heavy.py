"""alloc_heavy.py — an allocation-heavy, deterministic Python workload for
tests/test_programs.sh: run with PYTHONMALLOC=malloc (every object goes through
malloc) and PYTHONHASHSEED=0, once plainly and once with LD_PRELOAD=libebb.so;
the two outputs must be byte-identical.

dicts, lists, strings, sorting, regular expressions, json round trips, an
in-memory sqlite3 database, bytearray growth, reference cycles for the gc.
"""
import collections
import gc
import hashlib
import json
import random
import re
import sqlite3


def h(data):
    if isinstance(data, str):
        data = data.encode()
    return hashlib.sha256(data).hexdigest()[:16]


rng = random.Random(20240101)

# Dicts that grow, shrink and grow again.
d = {}
for i in range(200000):
    d["key%d" % i] = [i, str(i) * 3, {"mod": i % 7}]
for i in range(0, 200000, 3):
    del d["key%d" % i]
for i in range(50000):
    d["again%d" % i] = (i, i * i)
print("dict", len(d), h(repr(sorted(d.items())[:2000])))

# Lists and sorting.
floats = [rng.random() for _ in range(300000)]
floats.sort()
print("floats", len(floats), h(repr(floats[::997])))
words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 12)))
         for _ in range(100000)]
counts = collections.Counter(words)
print("counter", counts.most_common(5))
unique = sorted(set(words), key=lambda w: (len(w), w))
print("unique", len(unique), unique[:5], unique[-3:])
print("sorted words", h("\n".join(sorted(words, reverse=True))))

# Strings: join, split, replace, regular expressions, formatting.
big = "-".join(words)
print("join", len(big), h(big))
print("split", len(big.split("-")), len(big.replace("a", "AA")))
print("regex", len(re.findall(r"a[bc]+d", big)), len(re.sub(r"(\w)\1", r"<\1>", big)))
lines = ["%06d|%s|%.3f" % (i, w, i / 3) for i, w in enumerate(words)]
print("format", h("\n".join(lines)))

# JSON round trips.
obj = {"items": [{"id": i, "name": w, "tags": list(w), "score": i / 7}
                 for i, w in enumerate(words[:20000])]}
for _ in range(5):
    txt = json.dumps(obj, sort_keys=True)
    obj = json.loads(txt)
print("json", len(txt), h(txt))

# An in-memory sqlite3 database.
db = sqlite3.connect(":memory:")
db.execute("create table t (id integer primary key, word text, n integer, blob blob)")
db.executemany("insert into t (word, n, blob) values (?, ?, ?)",
               ((w, len(w), w.encode() * 20) for w in words))
db.execute("create index t_word on t(word)")
print("sqlite", db.execute("select count(*), sum(n), count(distinct word) from t").fetchone())
for row in db.execute("select n, count(*), sum(length(blob)) from t group by n order by n"):
    print("  ", row)
print(db.execute("select word from t where word like 'abc%' order by word limit 5").fetchall())
db.execute("delete from t where n % 2 = 0")
db.commit()
db.execute("vacuum")
print("sqlite after delete", db.execute("select count(*), sum(n) from t").fetchone())
db.close()

# bytearray growth and slicing.
ba = bytearray()
for i in range(200000):
    ba += i.to_bytes(4, "little")
print("bytearray", len(ba), h(bytes(ba)), h(bytes(ba[::7])))


# Reference cycles the collector must free (with the big data gone, so each
# collection walks only the cycles).
del d, floats, counts, unique, big, lines, obj, txt, ba
gc.collect()
class Node:
    def __init__(self, value):
        self.value = value
        self.peers = []


total = 0
for round_ in range(20):
    nodes = [Node(i) for i in range(5000)]
    for i, n in enumerate(nodes):
        n.peers.append(nodes[(i * 31 + round_) % len(nodes)])
        n.peers.append(nodes[(i + 1) % len(nodes)])
    total += sum(n.peers[0].value for n in nodes)
    del nodes
    gc.collect()
print("cycles", total)
print("done")
