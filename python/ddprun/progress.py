"""What a training script may tell ddprun, and ask it (issue 34). Standard library only.

Everything here is harmless outside ddprun: without the variables ddprun sets, heartbeat() and
waiting() do nothing and the questions have their "not under ddprun" answers.

    import ddprun
    for step, batch in enumerate(loader, 1):
        ...
        ddprun.heartbeat(step, busy_s=busy)     # explicit progress (DDPRUN_HEARTBEAT_FILE)
    with ddprun.waiting():                      # time spent waiting for other ranks,
        my_custom_all_gather(x)                 # left out of the automatic busy time
"""

import contextlib
import math
import operator
import os
import sys

__all__ = ["heartbeat", "waiting", "stop_job", "exclude_node", "restart_count", "max_restarts",
           "under_ddprun", "auto_progress_enabled", "EXIT_DO_NOT_REQUEUE", "EXIT_NODE_EXCLUDED"]

# ddprun's exit code for a job that must not be started again as it is (common/exit_codes.h).
EXIT_DO_NOT_REQUEUE = 79
# ddprun's exit code for a node kept out of the job (common/exit_codes.h; EX_UNAVAILABLE).
EXIT_NODE_EXCLUDED = 69
_MAX_NOTICE_BYTES = 8192  # agent/process/worker_channel.h, kMaxNoticeBytes
_MAX_REASON_CHARS = 2000

_HEARTBEAT_ENV = "DDPRUN_HEARTBEAT_FILE"
_AUTO_PROGRESS_ENV = "DDPRUN_AUTO_PROGRESS_FILE"
_heartbeat = None  # (path, fd) of the open heartbeat file, opened at the first heartbeat


def heartbeat(step, busy_s=None):
    """Tells ddprun that this rank finished step `step` (an int >= 0), optionally busy for
    `busy_s` seconds in it (not counting time spent waiting for other ranks).

    Rewrites the first line of $DDPRUN_HEARTBEAT_FILE ("<step>\\n" or "<step> <busy>\\n"); the
    agent's hang and straggler detection read it, and it takes precedence over the automatic
    progress. Costs one pwrite; the file stays open after the first call. Outside ddprun it
    does nothing. Raises TypeError or ValueError for a bad step or busy time; a failed write is
    ignored (progress reports never stop training)."""
    if isinstance(step, bool):
        raise TypeError("ddprun.heartbeat: step must be an int, not bool")
    try:
        step = operator.index(step)
    except TypeError:
        raise TypeError(f"ddprun.heartbeat: step must be an int, not {type(step).__name__}") from None
    if step < 0:
        raise ValueError(f"ddprun.heartbeat: step must be >= 0, got {step}")
    if busy_s is None:
        line = f"{step}\n"
    else:
        try:
            busy = float(busy_s)
        except (TypeError, ValueError):
            raise TypeError("ddprun.heartbeat: busy_s must be a number of seconds or None, not "
                            f"{type(busy_s).__name__}") from None
        if not math.isfinite(busy) or busy < 0:
            raise ValueError(f"ddprun.heartbeat: busy_s must be finite and >= 0, got {busy_s!r}")
        line = f"{step} {busy:.6f}\n"
    path = os.environ.get(_HEARTBEAT_ENV)
    if not path:
        return
    global _heartbeat
    try:
        if _heartbeat is None or _heartbeat[0] != path:
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
            if _heartbeat is not None:
                os.close(_heartbeat[1])
            _heartbeat = (path, fd)
        os.pwrite(_heartbeat[1], line.encode(), 0)
    except OSError:
        pass


def waiting(function=None):
    """Marks time spent waiting for other ranks (a hand-written all-gather, a custom barrier),
    so that ddprun's automatic progress leaves it out of this rank's busy time. torch's own
    collectives and DDP's gradient synchronisation are counted already.

        with ddprun.waiting():
            ...
        @ddprun.waiting            # or @ddprun.waiting()
        def exchange(...): ...

    Outside ddprun, or without automatic progress, it does nothing."""
    if function is not None:
        if not callable(function):
            raise TypeError("ddprun.waiting takes no argument, or decorates a function")
        return _waiting()(function)
    return _waiting()


@contextlib.contextmanager
def _waiting():
    runtime = sys.modules.get("_ddprun_bootstrap")
    if runtime is None:
        yield
        return
    token = runtime.begin_waiting()
    try:
        yield
    finally:
        runtime.end_waiting(token)


def stop_job(reason):
    """Ends the whole job for good: no restart, whatever --max_restarts has left, and ddprun
    exits 79 ("do not requeue") on every node with `reason` in its failure report. For a failure
    that another attempt would only repeat (a NaN loss, a corrupt data set, a bad config).

        if not math.isfinite(loss):
            ddprun.stop_job(f"NaN loss at step {step}")

    Tells the agent in one datagram ($DDPRUN_WORKER_SOCKET; the other ranks are stopped), then
    ends this rank as sys.exit(79) does (SystemExit: `finally` blocks and atexit handlers run).
    Outside ddprun it writes the reason to stderr and exits 79 the same way. Does not return."""
    _tell_agent_and_exit("stop_job", reason, EXIT_DO_NOT_REQUEUE)


def exclude_node(reason):
    """Takes this rank's node out of the job: the node itself is unfit to train (a GPU with ECC
    errors, a NIC that keeps dropping). Its agent stops the node's other ranks, prints the
    failure report with the request as its cause ("rank 3 asked to exclude this node: ECC
    errors on GPU 3"), leaves the job saying why and exits 69; a waiting spare node takes its
    place, and the rendezvous keeps the host out for a cool-down. No restart is charged.

        if ecc_errors(gpu) > 0:
            ddprun.exclude_node(f"ECC errors on GPU {gpu}")

    Tells the agent in one datagram ($DDPRUN_WORKER_SOCKET), then ends this rank as sys.exit(69)
    does. Outside ddprun it writes the reason to stderr and exits 69 the same way. Does not
    return."""
    _tell_agent_and_exit("exclude_node", reason, EXIT_NODE_EXCLUDED)


def _tell_agent_and_exit(event, reason, exit_code):
    reason = str(reason) if reason is not None else ""
    path = os.environ.get("DDPRUN_WORKER_SOCKET")
    if path:
        _send_notice(path, event, reason)
    else:
        sys.stderr.write(f"ddprun.{event}: {reason or 'no reason given'}\n")
    sys.stderr.flush()
    raise SystemExit(exit_code)


def _send_notice(path, event, reason):
    import json
    import socket
    try:
        local_rank = int(os.environ.get("LOCAL_RANK", "-1"))
    except ValueError:
        local_rank = -1
    limit = _MAX_REASON_CHARS
    while True:
        data = json.dumps({"event": event, "local_rank": local_rank, "pid": os.getpid(),
                           "reason": reason[:limit]}, ensure_ascii=False).encode("utf-8", "replace")
        if len(data) <= _MAX_NOTICE_BYTES or limit == 0:
            break
        limit //= 2
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.setblocking(False)
            s.sendto(data, path)
    except OSError as e:
        sys.stderr.write(f"ddprun.{event}: could not tell the agent ({e}): {reason}\n")


def restart_count():
    """How many times ddprun restarted this job's workers before this attempt (0 at the first
    attempt, and outside ddprun)."""
    return _int_env("TORCHELASTIC_RESTART_COUNT")


def max_restarts():
    """How many restarts ddprun allows this job (--max_restarts; 0 outside ddprun)."""
    return _int_env("TORCHELASTIC_MAX_RESTARTS")


def under_ddprun():
    """True in a worker started by ddprun: a Python worker runs under ddprun's bootstrap, and any
    worker gets one of its channels (torchrun's TORCHELASTIC_* variables say nothing: ddprun
    sets them too)."""
    return "_ddprun_bootstrap" in sys.modules or any(
        os.environ.get(name) for name in (_HEARTBEAT_ENV, _AUTO_PROGRESS_ENV,
                                          "DDPRUN_WORKER_SOCKET"))


def auto_progress_enabled():
    """True when ddprun reports this worker's steps and busy times by itself (optimizer steps,
    DDP's synchronisation), so that the script need not call heartbeat()."""
    return bool(os.environ.get(_AUTO_PROGRESS_ENV)) and "_ddprun_bootstrap" in sys.modules


def _int_env(name):
    try:
        return int(os.environ.get(name, "0"))
    except ValueError:
        return 0
