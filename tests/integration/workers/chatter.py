"""Prints two stdout lines and one stderr line, each naming the local rank; also prints its
TORCHELASTIC_ERROR_FILE to stdout. --fail-first-attempt: exit 1 on restart 0."""
import os
import sys

from worker_util import local_rank, restart_count

rank = local_rank()
print(f"out{rank} line1")
print(f"out{rank} line2")
print(f"err{rank} line1", file=sys.stderr)
print(f"errfile{rank} {os.environ['TORCHELASTIC_ERROR_FILE']}")
sys.stdout.flush()
sys.stderr.flush()
if "--fail-first-attempt" in sys.argv and restart_count() == 0:
    sys.exit(1)
