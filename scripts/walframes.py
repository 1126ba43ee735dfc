#!/usr/bin/env python3
"""Count the WAL frames a SQLite store's commits wrote, by table and index.

    walframes.py DB                       # run a load yourself, then press Enter
    walframes.py DB --url URL [--events N] [--connections C] [--ordered]

Holds a read transaction on DB, so that the WAL cannot restart (a
checkpoint cannot pass a reader), and notes where its valid frames end.
(A reader whose snapshot the database file already holds does not stop a
restart, so it first commits PRAGMA user_version set to its own value: one
frame of page 1, which changes nothing. Should the WAL restart all the same,
it says so rather than count part of the load.)
Then either waits for Enter while you run a load, or sends one: N events
(default 2,000) of about 1 KiB, a generic JSON body whose "id" is random
(as Stripe's, GitHub's and Shopify's are) or, with --ordered, in order,
from C connections (default 32) to URL, a source deduplicating on json:id.
It then reads the frames written since and names each frame's page by the
b-tree it belongs to (SQLite's dbstat table, through the sqlite3 command).
Page 1 is named sqlite_schema: it holds the database header, rewritten
whenever the file grows. BENCHMARKS.md, "Fewer pages per event", shows
how it was used.
"""
import argparse
import collections
import http.client
import json
import os
import sqlite3
import struct
import subprocess
import sys
import threading
import urllib.parse


def frames(data, start):
    """Yields (offset, page, commit) of the frames with the header's salt."""
    page_size = struct.unpack(">I", data[8:12])[0]
    salt, size = data[16:24], 24 + page_size
    at = start
    while at + size <= len(data) and data[at + 8:at + 16] == salt:
        page, commit = struct.unpack(">II", data[at:at + 8])
        yield at, page, commit
        at += size


def wal_end(path):
    """The offset after the WAL's last valid frame (32 when it has none)."""
    try:
        data = open(path, "rb").read()
    except FileNotFoundError:
        return 32
    if len(data) < 32:
        return 32
    end = 32
    for at, _, _ in frames(data, 32):
        end = at + 24 + struct.unpack(">I", data[8:12])[0]
    return end


def load(url, events, connections, ordered):
    u = urllib.parse.urlsplit(url)
    pad = "x" * 900
    run = os.urandom(4).hex()  # a run's ordered ids are new, not duplicates of the last run's

    def worker(k):
        c = http.client.HTTPConnection(u.hostname, u.port or 80)
        for i in range(k, events, connections):
            eid = "evt_%s_%08d" % (run, i) if ordered else "evt_" + os.urandom(12).hex()
            body = json.dumps({"id": eid, "type": "thing.updated", "data": {"object": {"id": "obj_%d" % (i % 500), "pad": pad}}})
            c.request("POST", u.path, body, {"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            if r.status != 200:
                print("event %s: %d" % (eid, r.status), file=sys.stderr)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(connections)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db")
    ap.add_argument("--url", help="send the load to this source's URL")
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--ordered", action="store_true", help="event ids in order, not random")
    a = ap.parse_args()

    hold = sqlite3.connect(a.db, isolation_level=None, timeout=30)
    v = hold.execute("PRAGMA user_version").fetchone()[0]
    hold.execute("PRAGMA user_version = %d" % v)
    hold.execute("BEGIN")
    hold.execute("SELECT count(*) FROM sqlite_schema").fetchall()
    start = wal_end(a.db + "-wal")
    salt = open(a.db + "-wal", "rb").read(24)[16:24]
    if a.url:
        load(a.url, a.events, a.connections, a.ordered)
        input_wait = "the load is sent: press Enter once its deliveries are done"
    else:
        input_wait = "holding the WAL: run the load, then press Enter"
    print(input_wait, file=sys.stderr)
    sys.stdin.readline()

    data = open(a.db + "-wal", "rb").read()
    if data[16:24] != salt:
        sys.exit("the WAL restarted during the load (a checkpoint got past the reader): run again")
    names = {}
    out = subprocess.run(["sqlite3", "-readonly", a.db, "SELECT pageno, name FROM dbstat"],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        page, name = line.split("|", 1)
        names[int(page)] = name
    per, commits, n = collections.Counter(), 0, 0
    for _, page, commit in frames(data, start):
        per[names.get(page, "page %d (free or new)" % page)] += 1
        n += 1
        commits += commit != 0
    hold.rollback()
    size = 24 + struct.unpack(">I", data[8:12])[0]
    print("commits %d, frames %d (%d bytes)" % (commits, n, n * size))
    for name, k in per.most_common():
        print("%6d %s" % (k, name))


if __name__ == "__main__":
    main()
