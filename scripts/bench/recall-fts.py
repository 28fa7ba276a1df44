# How recall's turns reach SQLite's FTS5 index, and what each way costs (issue 26): the CPU per
# conversation of the benchmark's (scripts/bench/service/bodies.py: 26 turns), 40 conversations a
# transaction and 256 (the writer's largest batch), written with Python's sqlite3 into a file in
# WAL mode, as compactd's store is.
#   python3 scripts/bench/recall-fts.py [conversations]
# "trigger": an insert trigger feeds FTS5 while multi-row inserts of compactd's chunk sizes
# (500/100/20/5/1 rows) write the turns; "one statement a batch": the turns are
# written, then indexed by one insert … select of the rows after the last one before the batch
# (what compactd does since migration 20261130000003). FTS5 ends an index segment with every
# statement that fed it, so the first makes a segment per insert, the second one per batch.
import json, os, sqlite3, subprocess, sys, tempfile, time

conversations = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
work = tempfile.mkdtemp()
subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "service", "bodies.py"), work], check=True)
prompt = json.load(open(os.path.join(work, "body.json")))["prompt"]
turns = [t for t in prompt.split("</conversation>")[0].split("\n\n") if t.strip()]

def chunks(total, rows_per_insert):
    """Row counts of the inserts of `total` turns: compactd's fixed chunk sizes when
    `rows_per_insert` is None, else that many rows each."""
    sizes = [500, 100, 20, 5, 1] if rows_per_insert is None else [rows_per_insert]
    while total:
        size = next((n for n in sizes if n <= total), total)
        yield size
        total -= size

def run(name, trigger, rows_per_insert, batch=40):
    path = os.path.join(work, "recall.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("pragma journal_mode=wal")
    db.execute("pragma synchronous=normal")
    db.execute("create table turns (id integer primary key, paths text, text text)")
    if trigger is not None:
        db.execute("create virtual table fts using fts5 (paths, text, content='turns', content_rowid='id')")
        db.execute("insert into fts (fts, rank) values ('automerge', 16)")
    if trigger:
        db.execute("create trigger turns_ai after insert on turns begin "
                   "insert into fts (rowid, paths, text) values (new.id, new.paths, new.text); end")
    started, n = time.process_time(), 0
    for _ in range(conversations // batch):
        db.execute("begin")
        last = db.execute("select coalesce(max(id), 0) from turns").fetchone()[0]
        values = []
        for _ in range(batch):
            n += 1
            for text in turns:
                values += ["src/x.rs", text.replace("@@N@@", str(n))]
        i = 0
        for size in chunks(len(values) // 2, rows_per_insert):
            part, i = values[i:i + 2 * size], i + 2 * size
            db.execute("insert into turns (paths, text) values " + ",".join(["(?, ?)"] * (len(part) // 2)), part)
        if trigger is False:
            db.execute("insert into fts (rowid, paths, text) select id, paths, text from turns where id > ?", (last,))
        db.execute("commit")
    spent = time.process_time() - started
    found = db.execute("select count(*) from fts where fts match 'tenant'").fetchone()[0] if trigger is not None else "-"
    print(f"{name:44} {1e6 * spent / conversations:7.0f} us/conversation  ('tenant' found in {found} turns)", flush=True)

print(f"{conversations} conversations of {len(turns)} turns, SQLite {sqlite3.sqlite_version}")
run("the table alone, no index", None, None)
run("trigger, one insert per turn", True, 1)
for batch in (40, 256):
    run(f"trigger, compactd's chunks, {batch} a batch", True, None, batch)
    run(f"one statement a batch, {batch} a batch", False, None, batch)
