"""An allocation-heavy Python program, for the benchmark suite's real-program
workload: run with PYTHONMALLOC=malloc so that every object Python allocates
goes through the process's malloc (the allocator under test, via LD_PRELOAD).

    PYTHONMALLOC=malloc python3 bench/programs/alloc_heavy.py [SCALE]

SCALE (default 10) multiplies the work of each phase; SCALE 10 takes about
3.5 s with glibc on a 2-core virtual machine. The phases, each building data
and dropping it, are what ordinary Python code does:

  words    strings built, split, joined, formatted; a dict counting words
  records  lists of dicts and tuples (rows of a table), sorted and grouped
  graph    a dict of sets (adjacency), then a breadth-first search
  sqlite   an in-memory sqlite3 database: inserts, an index, joins, groups

The program is deterministic (a fixed seed) and prints one line with a
checksum of its results, so the work cannot be skipped, and the allocator
that served it (malloc=, from /proc/self/maps, checked by the runner).
"""
import os
import random
import sqlite3
import sys


def words(rng, scale):
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["".join(rng.choice(alphabet) for _ in range(rng.randint(2, 10)))
             for _ in range(5000)]
    counts = {}
    total = 0
    for _ in range(scale * 200):
        line = " ".join(rng.choice(vocab) for _ in range(200))
        for w in line.split():
            counts[w] = counts.get(w, 0) + 1
        total += len(f"{line[:40]}|{len(line)}|{line.upper()[-20:]}")
    return total + len(counts) + max(counts.values())


def records(rng, scale):
    rows = [{"id": i, "name": f"user{i:06d}", "group": rng.randrange(100),
             "score": rng.random(), "tags": [rng.randrange(50) for _ in range(5)]}
            for i in range(scale * 10000)]
    rows.sort(key=lambda r: (r["group"], -r["score"]))
    groups = {}
    for r in rows:
        groups.setdefault(r["group"], []).append((r["id"], r["name"], tuple(r["tags"])))
    best = [max(g, key=lambda t: sum(t[2])) for g in groups.values()]
    return sum(b[0] for b in best) + len(rows)


def graph(rng, scale):
    n = scale * 5000
    adj = {i: set() for i in range(n)}
    for _ in range(n * 4):
        a, b = rng.randrange(n), rng.randrange(n)
        adj[a].add(b)
        adj[b].add(a)
    seen = {0: 0}
    frontier = [0]
    while frontier:
        nxt = []
        for v in frontier:
            for w in adj[v]:
                if w not in seen:
                    seen[w] = seen[v] + 1
                    nxt.append(w)
        frontier = nxt
    return len(seen) + sum(seen.values())


def database(rng, scale):
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE person (id INTEGER PRIMARY KEY, name TEXT, city INTEGER)")
    db.execute("CREATE TABLE purchase (person INTEGER, item TEXT, price REAL)")
    n = scale * 2000
    db.executemany("INSERT INTO person VALUES (?, ?, ?)",
                   ((i, f"person-{i}", rng.randrange(50)) for i in range(n)))
    db.executemany("INSERT INTO purchase VALUES (?, ?, ?)",
                   ((rng.randrange(n), f"item-{rng.randrange(1000)}", rng.random() * 100)
                    for _ in range(n * 5)))
    db.execute("CREATE INDEX purchase_person ON purchase (person)")
    total = 0
    for city, count, spent in db.execute(
            "SELECT p.city, COUNT(*), SUM(u.price) FROM person p "
            "JOIN purchase u ON u.person = p.id GROUP BY p.city ORDER BY 3 DESC"):
        total += city + count + int(spent)
    for (name,) in db.execute("SELECT name FROM person WHERE id IN "
                              "(SELECT person FROM purchase WHERE price > 99.5)"):
        total += len(name)
    db.close()
    return total


def malloc_provider():
    """The preloaded allocator's file name if it is mapped, else libc's."""
    preload = os.environ.get("LD_PRELOAD", "").split(":")[0]
    if preload:
        real = os.path.realpath(preload)  # maps names the file, not the symlink
        with open("/proc/self/maps") as maps:
            if any(line.rstrip().endswith(" " + real) for line in maps):
                return os.path.basename(preload)
    return "libc.so.6"


def main():
    scale = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    rng = random.Random(20261129)
    check = words(rng, scale) + records(rng, scale) + graph(rng, scale) + database(rng, scale)
    print(f"python scale={scale} check={check} malloc={malloc_provider()}")


if __name__ == "__main__":
    main()
