"""Records attempt_<restart>_<local_rank> (its pid); local rank 0 exits with <exit_code> while
TORCHELASTIC_RESTART_COUNT < <succeed_from>, every other case exits 0.

usage: restart_until.py <succeed_from> <exit_code>
"""
import os
import sys

from worker_util import local_rank, restart_count, write_marker

succeed_from, exit_code = int(sys.argv[1]), int(sys.argv[2])
write_marker(f"attempt_{restart_count()}_{local_rank()}", str(os.getpid()))
if local_rank() == 0 and restart_count() < succeed_from:
    sys.exit(exit_code)
