"""A worker for the service tests (systemd notify, SLURM). Once its SIGUSR1/SIGUSR2 handler is
installed it writes svc_<...> (see mn_util.marker_name) with its placement and the service
manager's variables it sees (which must be none); each SIGUSR1/SIGUSR2 it receives writes
usr_n<node>_l<local_rank>_<k> (the signal number), and the worker goes on. Then:
  --release FIFO   waits for one byte on FIFO, then exits 0 (bounded: mn_util.WAIT_LIMIT_S);
  --fail-first     local rank 0 of the first attempt exits 1 at once (a restart follows);
  --heartbeat      heartbeats through DDPRUN_HEARTBEAT_FILE before the marker: local rank 0
                   sends step 10 once and then nothing; every other rank sends step
                   10 + 2 * local_rank and repeats it every 0.1 s until released (so rank 0's
                   heartbeat is the oldest, by a growing margin). Needs --release.
"""
import argparse
import os
import select
import signal

import mn_util

parser = argparse.ArgumentParser()
parser.add_argument("--release")
parser.add_argument("--fail-first", action="store_true")
parser.add_argument("--heartbeat", action="store_true")
args = parser.parse_args()

received = 0


def on_user_signal(signo, frame):
    global received
    received += 1
    mn_util.write_marker("usr_n{}_l{}_{}".format(mn_util.NODE, os.environ["LOCAL_RANK"], received),
                         signo)


for s in (signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(s, on_user_signal)

if args.fail_first and mn_util.env_int("TORCHELASTIC_RESTART_COUNT") == 0 \
        and mn_util.env_int("LOCAL_RANK") == 0:
    raise SystemExit(1)

release_fd = mn_util.open_release(args.release) if args.release else None
info = mn_util.placement()
info["service_env"] = {key: os.environ[key] for key in
                       ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID") if key in os.environ}
local_rank = mn_util.env_int("LOCAL_RANK")
step = 10 + 2 * local_rank


def send_heartbeat():
    with open(os.environ["DDPRUN_HEARTBEAT_FILE"], "w") as f:
        f.write("{}\n".format(step))


if args.heartbeat:
    send_heartbeat()
mn_util.write_marker(mn_util.marker_name("svc"), info)
if args.heartbeat and local_rank != 0:
    # Beats until released (the wait limit armed by open_release bounds this loop too).
    while not select.select([release_fd], [], [], 0.1)[0]:
        send_heartbeat()
    mn_util.wait_for_release(release_fd)
elif release_fd is not None:
    mn_util.wait_for_release(release_fd)
else:
    mn_util.wait_for_agent()
