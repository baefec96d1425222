"""Local rank 0 records its pid in victim_0, then SIGKILLs itself; other ranks wait."""
import os
import signal

from worker_util import local_rank, write_marker

if local_rank() == 0:
    write_marker("victim_0", str(os.getpid()))
    os.kill(os.getpid(), signal.SIGKILL)
while True:
    signal.pause()
