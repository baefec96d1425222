"""Snapshots on node-local disks (issue 37): resume anywhere, with no shared file system.

The torchrun tutorial's snapshot loop, with two calls changed:

    torch.save(snapshot, path)            ->  ddprun.save_snapshot(snapshot, directory, step)
    snapshot = torch.load(path, map_location=loc)
                                          ->  snapshot = ddprun.load_latest_snapshot(directory,
                                                                                  map_location=loc)

save_snapshot() writes a complete copy on every node (the rank with LOCAL_RANK 0 writes),
atomically (temp file, fsync, rename, fsync of the directory), in the background (this module
re-exports it from snapshot_write.py); load_latest_snapshot() is collective: the ranks agree
on the newest snapshot intact on at least one node, and nodes that lack it (or hold a damaged
copy) receive it from a holder over the default process group, in chunks, and store it.
docs/snapshots.md has the format and the guarantees.

Standard library only at import; torch is imported by the functions that need it.
"""

import os

from .snapshot_format import (SNAPSHOT_FORMAT_VERSION, SnapshotError, _fsync_directory,
                              _temp_path, list_snapshots, read_snapshot, snapshot_name,
                              verify_snapshot)
from .snapshot_write import SnapshotWrite, save_snapshot, wait_for_snapshots

__all__ = ["save_snapshot", "wait_for_snapshots", "load_latest_snapshot", "read_snapshot",
           "verify_snapshot", "list_snapshots", "SnapshotWrite", "SnapshotError",
           "SNAPSHOT_FORMAT_VERSION", "DEFAULT_CHUNK_BYTES"]

DEFAULT_CHUNK_BYTES = 16 << 20


def _survey(directory):
    """What this rank's directory holds: every snapshot step, the newest intact one, and what
    was wrong with the newer damaged ones."""
    import socket
    survey = {"steps": [], "newest": None, "damaged": {}, "error": None,
              "host": socket.gethostname(), "directory": os.path.abspath(directory)}
    try:
        survey["steps"] = list_snapshots(directory)
    except OSError as e:  # reported on every rank after the exchange, rather than raised alone
        survey["error"] = f"{directory}: cannot list: {e.strerror}"
    for step in survey["steps"]:
        path = os.path.join(directory, snapshot_name(step))
        try:
            meta = verify_snapshot(path)
            size = os.path.getsize(path)
        except (SnapshotError, OSError) as e:
            survey["damaged"][step] = str(e) if isinstance(e, SnapshotError) else f"{path}: {e}"
            continue
        survey["newest"] = {"step": step, "size": size, "sha256": meta["sha256"]}
        break
    return survey


def _describe(surveys):
    lines = []
    for rank, s in enumerate(surveys):
        found = ", ".join(str(step) for step in s["steps"]) or "none"
        lines.append(f"rank {rank} ({s['host']}:{s['directory']}): steps {found}")
        for step, problem in sorted(s["damaged"].items(), key=lambda kv: -int(kv[0])):
            lines.append(f"  {problem}")
    return "\n".join(lines)


def load_latest_snapshot(directory, map_location=None, with_step=False,
                         chunk_bytes=DEFAULT_CHUNK_BYTES, **torch_load_args):
    """Loads the newest snapshot intact on at least one node: what save_snapshot() was given,
    as torch.load(path, map_location=...) returns it; None when no node has a snapshot (a
    fresh start). With with_step=True, (step, state) or None.

    Collective over the default process group when torch.distributed is initialised: call it
    on every rank, each with its node's directory. The ranks agree on the step, so every rank
    resumes from the same one; a rank whose directory lacks it, or holds a damaged copy,
    receives it from a holder by broadcasts of `chunk_bytes` (bounded memory; over NCCL the
    chunks go through the current CUDA device, so torch.cuda.set_device() first), checks it
    and stores it. Without an initialised process group it loads from `directory` alone (an
    error when WORLD_SIZE says there are several ranks).

    Raises SnapshotError, with the same message on every rank, when snapshots exist but none
    is intact anywhere: it names each rank's directory, its steps and what is wrong with them."""
    import torch
    directory = os.fspath(directory)
    wait_for_snapshots()  # this process's own write in flight is part of what there is
    if chunk_bytes < 1:
        raise ValueError(f"ddprun.load_latest_snapshot: chunk_bytes must be >= 1, "
                         f"got {chunk_bytes}")
    dist = torch.distributed
    distributed = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    if not distributed:
        if not (dist.is_available() and dist.is_initialized()):
            world = os.environ.get("WORLD_SIZE", "1")
            if world not in ("", "1"):
                raise SnapshotError(
                    f"ddprun.load_latest_snapshot: WORLD_SIZE is {world} but torch.distributed "
                    "is not initialised: call init_process_group() first, so that every rank "
                    "resumes from the same snapshot")
        surveys = [_survey(directory)]
    else:
        surveys = [None] * dist.get_world_size()
        dist.all_gather_object(surveys, _survey(directory))
    unreadable = [f"rank {rank}: {s['error']}" for rank, s in enumerate(surveys) if s["error"]]
    if unreadable:
        raise SnapshotError("ddprun.load_latest_snapshot: a snapshot directory cannot be read:\n"
                            + "\n".join(unreadable))
    found = [s for s in surveys if s["steps"]]
    if not found:
        return None
    intact = [(s["newest"]["step"], rank) for rank, s in enumerate(surveys) if s["newest"]]
    if not intact:
        raise SnapshotError("ddprun.load_latest_snapshot: snapshots exist but none is intact on "
                            "any node:\n" + _describe(surveys))
    step = max(intact)[0]
    holder = min(rank for s_step, rank in intact if s_step == step)
    path = os.path.join(directory, snapshot_name(step))
    error = None
    if distributed:
        needers = [rank for rank, s in enumerate(surveys)
                   if s["newest"] is None or s["newest"]["step"] != step]
        if needers:
            try:
                _transfer(surveys[holder]["newest"], holder, needers, directory, step,
                          chunk_bytes)
            except (SnapshotError, OSError) as e:
                error = str(e)
    state = None
    if error is None:
        try:
            state = read_snapshot(path, map_location=map_location, **torch_load_args)
        except Exception as e:  # unpickling can raise anything: reported on every rank below
            error = f"{type(e).__name__}: {e}"
    if distributed:
        errors = [None] * dist.get_world_size()
        dist.all_gather_object(errors, error)
        failed = [f"rank {r}: {e}" for r, e in enumerate(errors) if e]
        if failed:
            raise SnapshotError(f"ddprun.load_latest_snapshot: snapshot {step} could not be "
                                "loaded on every rank:\n" + "\n".join(failed))
    elif error:
        raise SnapshotError(f"ddprun.load_latest_snapshot: {error}")
    return (step, state) if with_step else state


def _chunk_device(dist):
    import torch
    backend = str(dist.get_backend())
    if "nccl" in backend and "gloo" not in backend:
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _transfer(newest, holder, needers, directory, step, chunk_bytes):
    """Broadcasts the holder's snapshot file `step` in chunks; every rank in `needers` writes
    them to a temp file, checks it and renames it into place. Every rank takes part in every
    broadcast, even after a local failure (which is raised at the end), so no rank is left
    waiting in a collective."""
    import torch
    dist = torch.distributed
    rank = dist.get_rank()
    size = newest["size"]
    device = _chunk_device(dist)
    buffer = bytearray(min(chunk_bytes, size) or 1)
    host_view = torch.frombuffer(buffer, dtype=torch.uint8)
    source = sink = temp = None
    failure = None
    try:
        if rank == holder:
            source = open(os.path.join(directory, snapshot_name(step)), "rb")
        elif rank in needers:
            os.makedirs(directory, exist_ok=True)
            temp = _temp_path(directory, step)
            sink = open(temp, "wb")
    except OSError as e:
        failure = e
    offset = 0
    while offset < size:
        n = min(chunk_bytes, size - offset)
        view = host_view[:n]
        if source is not None and failure is None:
            try:
                got = source.readinto(memoryview(buffer)[:n])
                if got != n:
                    failure = SnapshotError(f"{source.name}: shrank while being sent")
            except OSError as e:
                failure = e
        if device.type == "cpu":
            dist.broadcast(view, src=holder)
        else:
            on_device = view.to(device) if rank == holder else torch.empty(
                n, dtype=torch.uint8, device=device)
            dist.broadcast(on_device, src=holder)
            if sink is not None:
                view.copy_(on_device)
        if sink is not None and failure is None:
            try:
                sink.write(memoryview(buffer)[:n])
            except OSError as e:
                failure = e
        offset += n
    try:
        if source is not None:
            source.close()
        if sink is not None:
            if failure is None:
                sink.flush()
                os.fsync(sink.fileno())
            sink.close()
            if failure is not None:
                raise SnapshotError(f"{temp}: storing snapshot {step} received from rank "
                                    f"{holder} failed: {failure}")
            meta = verify_snapshot(temp)
            if meta["step"] != step or meta["sha256"] != newest["sha256"]:
                raise SnapshotError(f"{temp}: the copy received from rank {holder} is not its "
                                    f"snapshot {step}")
            os.rename(temp, os.path.join(directory, snapshot_name(step)))
            temp = None
            _fsync_directory(directory)
        elif failure is not None:
            raise SnapshotError(f"sending snapshot {step} failed: {failure}")
    finally:
        if temp is not None:
            try:
                os.unlink(temp)
            except FileNotFoundError:
                pass
