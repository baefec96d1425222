"""ddprun, installed from its wheel: the native ``ddprun`` and ``ddp-rendezvous`` programs live
in the environment's ``bin/`` (the wheel's scripts); this package finds them, so that
``python -m ddprun ...`` runs the same launcher as ``ddprun ...``.

For training scripts (standard library only, no-ops outside ddprun; ddprun.progress):
``heartbeat(step, busy_s=None)``, ``waiting()``, ``stop_job(reason)``, ``exclude_node(reason)``,
``restart_count()``,
``max_restarts()``,
``under_ddprun()``, ``auto_progress_enabled()``.

Snapshots on node-local disks (ddprun.snapshot; torch imported only when called):
``save_snapshot(state, directory, step)``, ``wait_for_snapshots()``,
``load_latest_snapshot(directory, map_location=None)``, ``read_snapshot(path)``."""

import os
import sys
import sysconfig

from .progress import (EXIT_DO_NOT_REQUEUE, EXIT_NODE_EXCLUDED, auto_progress_enabled,
                       exclude_node, heartbeat, max_restarts, restart_count, stop_job,
                       under_ddprun, waiting)
from .snapshot import (SnapshotError, SnapshotWrite, list_snapshots, load_latest_snapshot,
                       read_snapshot, save_snapshot, verify_snapshot, wait_for_snapshots)

__all__ = ["executable", "heartbeat", "waiting", "stop_job", "exclude_node", "restart_count",
           "max_restarts", "under_ddprun", "auto_progress_enabled", "EXIT_DO_NOT_REQUEUE",
           "EXIT_NODE_EXCLUDED", "save_snapshot", "wait_for_snapshots", "load_latest_snapshot",
           "read_snapshot", "verify_snapshot", "list_snapshots", "SnapshotWrite", "SnapshotError"]


def executable(name: str = "ddprun") -> str:
    """The path of the installed program `name` (``ddprun`` or ``ddp-rendezvous``).

    Looked for where pip put the wheel's scripts for this interpreter's install scheme (the
    environment's bin/, or ~/.local/bin for a --user install), then beside the interpreter.
    Raises FileNotFoundError naming the places looked at."""
    places = []
    for scheme in (None, f"{os.name}_user"):
        try:
            scripts = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        if scripts and scripts not in places:
            places.append(scripts)
    beside = os.path.dirname(sys.executable)
    if beside not in places:
        places.append(beside)
    for place in places:
        candidate = os.path.join(place, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(f"{name} is not installed in {', '.join(places)}: reinstall the ddprun wheel")
