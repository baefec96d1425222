"""One rank fails once every sibling is ready; the siblings record the SIGTERM they get.

usage: fail_with_siblings.py <failing_local_rank> <exit_code> [--keep-running]
Siblings install a SIGTERM handler, then open ready_<rank>.fifo (created by the test) to tell
the failing rank; the handler writes sigterm_<rank> and exits 143. The failing rank waits for
every sibling, writes a torchrun-format error file to $TORCHELASTIC_ERROR_FILE, records
failed_<rank> (its pid and error file path) and exits with <exit_code>.
--keep-running: siblings record SIGTERM but go on running (only SIGKILL ends them).
"""
import json
import os
import signal
import sys

from worker_util import local_rank, signal_ready, wait_ready, write_marker

failing, exit_code = int(sys.argv[1]), int(sys.argv[2])
rank = local_rank()
world = int(os.environ["LOCAL_WORLD_SIZE"])

if rank == failing:
    for sibling in range(world):
        if sibling != failing:
            wait_ready(f"ready_{sibling}.fifo")
    error_file = os.environ["TORCHELASTIC_ERROR_FILE"]
    callstack = ('Traceback (most recent call last):\n'
                 '  File "fail_with_siblings.py", line 30, in <module>\n'
                 'RuntimeError: boom\n')
    with open(error_file, "w") as f:
        json.dump({"message": {"message": "RuntimeError: boom",
                               "extraInfo": {"py_callstack": callstack,
                                             "timestamp": "1700000000"}}}, f)
    write_marker(f"failed_{rank}", json.dumps({"pid": os.getpid(), "error_file": error_file}))
    sys.exit(exit_code)


def on_sigterm(signo, frame):
    write_marker(f"sigterm_{rank}", str(signo))
    if "--keep-running" not in sys.argv:
        os._exit(128 + signo)


signal.signal(signal.SIGTERM, on_sigterm)
signal_ready(f"ready_{rank}.fifo")
while True:
    signal.pause()
