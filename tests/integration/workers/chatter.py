"""Prints two stdout lines and one stderr line, each naming the local rank; also prints its
TORCHELASTIC_ERROR_FILE to stdout.

--fail-first-attempt: on restart 0, once every rank has printed, the last rank exits 1 (needs
done_<rank>.fifo for all but the last rank).
"""
import os
import sys

from worker_util import last_rank_fails_after_the_others, local_rank, restart_count

rank = local_rank()
print(f"out{rank} line1")
print(f"out{rank} line2")
print(f"err{rank} line1", file=sys.stderr)
print(f"errfile{rank} {os.environ['TORCHELASTIC_ERROR_FILE']}")
sys.stdout.flush()
sys.stderr.flush()
if "--fail-first-attempt" in sys.argv and restart_count() == 0:
    last_rank_fails_after_the_others(1)
