"""Shared helpers for the multi-node tests' Python workers (plain Python, no torch).

Workers report to the test through files in $DDPRUN_TEST_OUT, written atomically (temp file,
then rename), so a marker that exists is complete. Each node's agent runs with
DDPRUN_TEST_NODE=<N> (its address is 127.0.0.<N>), which its workers inherit: marker names
carry it, so two nodes never write the same file.
"""
import json
import os
import signal
import sys

OUT = os.environ["DDPRUN_TEST_OUT"]
NODE = os.environ.get("DDPRUN_TEST_NODE", "0")

# Longest any worker waits for the test or for its agent. A test that goes wrong sees the
# worker exit with TIMED_OUT instead of hanging until the ctest timeout.
WAIT_LIMIT_S = 60
TIMED_OUT = 9

PLACEMENT_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                  "GROUP_WORLD_SIZE", "ROLE_RANK", "TORCHELASTIC_RESTART_COUNT",
                  "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT")


def env_int(key):
    return int(os.environ[key])


def placement():
    """The worker's placement variables, and its node and pid."""
    info = {key: os.environ.get(key, "") for key in PLACEMENT_KEYS}
    info["node"] = NODE
    info["pid"] = os.getpid()
    return info


def write_marker(name, payload):
    path = os.path.join(OUT, name)
    temp = path + ".tmp"
    with open(temp, "w") as f:
        json.dump(payload, f)
    os.rename(temp, path)


def marker_name(prefix):
    """<prefix>_n<node>_w<world>_r<restart>_l<local_rank>: one per worker start."""
    return "{}_n{}_w{}_r{}_l{}".format(prefix, NODE, os.environ["WORLD_SIZE"],
                                      os.environ["TORCHELASTIC_RESTART_COUNT"],
                                      os.environ["LOCAL_RANK"])


def _on_alarm(signo, frame):
    sys.stderr.write("worker waited longer than {} s\n".format(WAIT_LIMIT_S))
    os._exit(TIMED_OUT)


def arm_wait_limit():
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(WAIT_LIMIT_S)


def wait_for_agent():
    """Blocks until a signal ends the worker (its agent's SIGTERM), or exits TIMED_OUT."""
    arm_wait_limit()
    while True:
        signal.pause()


def open_release(fifo):
    """Opens the test's release FIFO and arms the wait limit. Read-write, so that opening never
    blocks and reading never sees end of file; the test writes (one byte per worker, with
    O_NONBLOCK) once every worker's marker exists, i.e. once every worker holds it open."""
    arm_wait_limit()
    return os.open(fifo, os.O_RDWR)


def wait_for_release(fd):
    """Blocks until this worker's byte arrives on the FIFO from open_release(), or exits
    TIMED_OUT."""
    os.read(fd, 1)
    signal.alarm(0)
