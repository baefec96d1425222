"""Local rank 1 stops itself with the given job-control signal (default SIGTTIN), as a worker
that reads the terminal from a background process group would be; the others wait for their
agent to end them."""
import os
import signal
import sys

from worker_util import local_rank

signo = getattr(signal, sys.argv[1]) if len(sys.argv) > 1 else signal.SIGTTIN
if local_rank() == 1:
    os.kill(os.getpid(), signo)
signal.alarm(60)  # bounded: a test that goes wrong sees a SIGALRM death, not a hang
signal.pause()
