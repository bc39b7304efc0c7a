#!/usr/bin/python3
"""processes_in_group.py PGID: prints how many live processes are in process group PGID (the
cluster scripts' check that nothing of a stopped cluster is left)."""
import os
import sys

pgid = int(sys.argv[1])
n = 0
for p in filter(str.isdigit, os.listdir("/proc")):
    try:
        n += os.getpgid(int(p)) == pgid
    except OSError:
        pass
print(n)
