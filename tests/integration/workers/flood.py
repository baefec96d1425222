"""Writes <lines> numbered lines to stdout and to stderr, then a last stdout fragment without a
newline: exercises output routing under volume (the launcher's pipes fill many times over).

usage: flood.py <lines>
"""
import sys

from worker_util import local_rank

rank = local_rank()
count = int(sys.argv[1])
out = sys.stdout
for i in range(count):
    out.write(f"r{rank} line {i:06d} " + "x" * 60 + "\n")
    if i % 1000 == 0:
        print(f"r{rank} err {i:06d}", file=sys.stderr)
out.write(f"r{rank} no newline at the end")
out.flush()
