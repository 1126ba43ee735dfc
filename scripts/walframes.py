#!/usr/bin/env python3
"""Count the WAL frames a SQLite store's commits wrote, by table and index.

    walframes.py DB OFFSET [HOLD_SECONDS]

Holds a read transaction on DB for HOLD_SECONDS (default 30) so that the
WAL is not restarted (a checkpoint cannot pass a reader), waits for Enter,
then reads DB-wal from byte OFFSET (its size before the load: stat -c %s)
and names each frame's page by the b-tree it belongs to (SQLite's dbstat
table, through the sqlite3 command). BENCHMARKS.md, "Fewer pages per
event", shows how it was used.
"""
import collections
import sqlite3
import struct
import subprocess
import sys


def main():
    db, offset = sys.argv[1], int(sys.argv[2])
    hold = sqlite3.connect(db, isolation_level=None, timeout=float(sys.argv[3]) if len(sys.argv) > 3 else 30)
    hold.execute("BEGIN")
    hold.execute("SELECT count(*) FROM sqlite_schema").fetchall()
    print("holding the WAL: run the load, then press Enter", file=sys.stderr)
    sys.stdin.readline()
    data = open(db + "-wal", "rb").read()
    page_size = struct.unpack(">I", data[8:12])[0]
    salt = data[16:24]
    names = {}
    out = subprocess.run(["sqlite3", "-readonly", db, "SELECT pageno, name FROM dbstat"],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        page, name = line.split("|", 1)
        names[int(page)] = name
    frame = 24 + page_size
    at = 32 + max(0, (offset - 32 + frame - 1) // frame) * frame
    per, commits, frames = collections.Counter(), 0, 0
    while at + frame <= len(data) and data[at + 8:at + 16] == salt:
        page, commit = struct.unpack(">II", data[at:at + 8])
        per[names.get(page, "page %d (free or new)" % page)] += 1
        frames += 1
        commits += commit != 0
        at += frame
    hold.rollback()
    print("commits %d, frames %d (%d bytes)" % (commits, frames, frames * frame))
    for name, n in per.most_common():
        print("%6d %s" % (n, name))


if __name__ == "__main__":
    main()
