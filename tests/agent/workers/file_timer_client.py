"""A worker that times one block of work with torch's own FileTimerClient.

usage: file_timer_client.py FIFO SIGNAL_NAME AFTER INSIDE OUTSIDE

Configures torch.distributed.elastic.timer with a FileTimerClient on FIFO (as a worker does
with TORCHELASTIC_TIMER_FILE), then runs `with timer.expires(after=AFTER)` around INSIDE
seconds of work, then works OUTSIDE seconds more with no scope held, and exits 0. A block
that outlasts AFTER is the case under test: the agent's timer server must kill the worker with
SIGNAL_NAME. The scope id is torch's default (this file and line).
"""
import signal
import sys
import time

from torch.distributed.elastic import timer


def main() -> int:
    fifo, signal_name = sys.argv[1], sys.argv[2]
    after, inside, outside = (float(a) for a in sys.argv[3:6])
    timer.configure(timer.FileTimerClient(fifo, signal=getattr(signal, signal_name)))
    with timer.expires(after=after):
        time.sleep(inside)
    time.sleep(outside)
    return 0


if __name__ == "__main__":
    sys.exit(main())
