"""torch's own watchdog: a FileTimerClient scope that expires while the worker is stuck.

usage: file_timer_worker.py SIGNAL_NAME
Local rank 0 arms a 0.3 s scope around a sleep that outlasts it; the agent (ddprun, as torchrun's
agent) must kill it with the signal the request names. Rank 1 waits for its agent.
"""
import os
import signal
import sys
import time

import torch.distributed.elastic.timer as timer

signo = getattr(signal, sys.argv[1])
if int(os.environ["LOCAL_RANK"]) == 0:
    timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"], signal=signo))
    with timer.expires(after=0.3):
        time.sleep(60)
    sys.exit(0)  # not reached when the timer works
signal.alarm(60)
signal.pause()
