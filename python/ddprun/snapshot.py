"""Snapshots on node-local disks (issue 37): resume anywhere, with no shared file system.

The torchrun tutorial's snapshot loop, with two calls changed:

    torch.save(snapshot, path)            ->  ddprun.save_snapshot(snapshot, directory, step)
    snapshot = torch.load(path, map_location=loc)
                                          ->  snapshot = ddprun.load_latest_snapshot(directory,
                                                                                  map_location=loc)

save_snapshot() writes a complete copy on every node (the rank with LOCAL_RANK 0 writes), atomically
(temp file, fsync, rename, fsync of the directory), in the background; load_latest_snapshot()
is collective: the ranks agree on the newest snapshot intact on at least one node, and nodes
that lack it (or hold a damaged copy) receive it from a holder over the default process group,
in chunks, and store it. docs/snapshots.md has the format and the guarantees.

Standard library only at import; torch is imported by the functions that need it.
"""

import atexit
import io
import os
import re
import sys
import threading

# hashlib, json and socket are imported where used: `import ddprun` stays cheap.

__all__ = ["save_snapshot", "wait_for_snapshots", "load_latest_snapshot", "read_snapshot",
           "verify_snapshot", "list_snapshots", "SnapshotWrite", "SnapshotError",
           "SNAPSHOT_FORMAT_VERSION"]

SNAPSHOT_FORMAT_VERSION = 1
_MAGIC = b"DDPRUN-PT-SNAPSHOT"
_MAX_HEADER_BYTES = 4096      # both header lines together; checked before anything is trusted
_MAX_STEP = 10 ** 12 - 1      # twelve digits in the name
_NAME = re.compile(r"^snapshot-(\d{12})\.pt$")
_TEMP = re.compile(r"^\.snapshot-(\d{12})\.pt\.tmp-(.+)-(\d+)-(\d+)$")
_READ_BYTES = 1 << 20
DEFAULT_CHUNK_BYTES = 16 << 20


class SnapshotError(RuntimeError):
    """A snapshot could not be written, read or agreed on. The message names the file (or the
    ranks and what each found) and the problem."""


# --- The format: pure functions over bytes ----------------------------------------------------

def snapshot_name(step):
    """snapshot-<step, 12 digits>.pt"""
    return f"snapshot-{_check_step(step):012d}.pt"


def encode_header(step, payload_bytes, sha256_hex):
    """The two header lines: "DDPRUN-PT-SNAPSHOT <version>\\n" and one JSON line with the step,
    the payload's length and its SHA-256."""
    import json
    meta = {"step": _check_step(step), "payload_bytes": int(payload_bytes), "sha256": sha256_hex}
    header = b"%s %d\n%s\n" % (_MAGIC, SNAPSHOT_FORMAT_VERSION,
                               json.dumps(meta, sort_keys=True).encode())
    assert len(header) <= _MAX_HEADER_BYTES
    return header


def parse_header(prefix):
    """Parses the header at the start of `prefix` (the file's first bytes, at most
    _MAX_HEADER_BYTES needed). Returns (meta dict, header length). Raises ValueError saying what
    is wrong: not a snapshot, another format version, a malformed or incomplete header."""
    import json
    prefix = bytes(prefix[:_MAX_HEADER_BYTES])
    first = prefix.find(b"\n")
    if first < 0:
        raise ValueError("truncated: no complete header" if prefix.startswith(_MAGIC[:len(prefix)])
                         else "not a ddprun snapshot (no header)")
    words = prefix[:first].split(b" ")
    if len(words) != 2 or words[0] != _MAGIC:
        raise ValueError("not a ddprun snapshot (bad magic)")
    try:
        version = int(words[1])
    except ValueError:
        raise ValueError(f"bad format version {words[1][:20]!r}") from None
    if version != SNAPSHOT_FORMAT_VERSION:
        raise ValueError(f"format version {version}, this ddprun reads version "
                         f"{SNAPSHOT_FORMAT_VERSION}")
    second = prefix.find(b"\n", first + 1)
    if second < 0:
        raise ValueError("truncated: no complete header")
    try:
        meta = json.loads(prefix[first + 1:second])
    except ValueError as e:
        raise ValueError(f"malformed header ({e})") from None
    if (not isinstance(meta, dict) or not isinstance(meta.get("step"), int)
            or not isinstance(meta.get("payload_bytes"), int) or meta["payload_bytes"] < 0
            or not isinstance(meta.get("sha256"), str) or len(meta["sha256"]) != 64):
        raise ValueError("malformed header (step, payload_bytes or sha256 missing)")
    return meta, second + 1


def verify_snapshot(path):
    """Checks the file at `path` without holding its payload in memory. Returns its header (a
    dict: step, payload_bytes, sha256). Raises SnapshotError naming the file and the problem:
    not a snapshot, another version, truncated, checksum mismatch, a step that is not its
    name's."""
    with _open_snapshot(path) as f:
        meta, digest = _hash_payload(path, f)
    if digest != meta["sha256"]:
        raise SnapshotError(f"{path}: checksum mismatch")
    return meta


def read_snapshot(path, map_location=None, **torch_load_args):
    """Loads one snapshot file (as torch.load would the object given to save_snapshot), after
    checking it. Raises SnapshotError naming the file and the problem."""
    import torch
    with _open_snapshot(path) as f:
        meta, header_len = _read_header(path, f)
        payload = f.read()
    _check_payload(path, meta, payload)
    return torch.load(io.BytesIO(payload), map_location=map_location, **torch_load_args)


def list_snapshots(directory):
    """The steps of the snapshot files in `directory`, newest first ([] when it does not exist)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted((int(m.group(1)) for m in map(_NAME.match, names) if m), reverse=True)


def _check_step(step):
    if isinstance(step, bool) or not isinstance(step, int):
        raise TypeError(f"ddprun snapshot: step must be an int, not {type(step).__name__}")
    if not 0 <= step <= _MAX_STEP:
        raise ValueError(f"ddprun snapshot: step must be in [0, {_MAX_STEP}], got {step}")
    return step


def _open_snapshot(path):
    try:
        return open(path, "rb")
    except OSError as e:
        raise SnapshotError(f"{path}: cannot open: {e.strerror}") from None


def _read_header(path, f):
    prefix = f.read(_MAX_HEADER_BYTES)
    try:
        meta, header_len = parse_header(prefix)
    except ValueError as e:
        raise SnapshotError(f"{path}: {e}") from None
    expected = os.fstat(f.fileno()).st_size - header_len
    if expected != meta["payload_bytes"]:
        what = "truncated" if expected < meta["payload_bytes"] else "too long"
        raise SnapshotError(f"{path}: {what}: header promises {meta['payload_bytes']} payload "
                            f"bytes, file has {max(expected, 0)}")
    m = _NAME.match(os.path.basename(path))
    if m and int(m.group(1)) != meta["step"]:
        raise SnapshotError(f"{path}: holds step {meta['step']}, not its name's")
    f.seek(header_len)
    return meta, header_len


def _hash_payload(path, f):
    import hashlib
    meta, _ = _read_header(path, f)
    h = hashlib.sha256()
    while True:
        block = f.read(_READ_BYTES)
        if not block:
            break
        h.update(block)
    return meta, h.hexdigest()


def _check_payload(path, meta, payload):
    import hashlib
    if len(payload) != meta["payload_bytes"]:
        raise SnapshotError(f"{path}: truncated: header promises {meta['payload_bytes']} "
                            f"payload bytes, file has {len(payload)}")
    if hashlib.sha256(payload).hexdigest() != meta["sha256"]:
        raise SnapshotError(f"{path}: checksum mismatch")


# --- Writing ------------------------------------------------------------------------------------

_temp_counter = 0
_temp_lock = threading.Lock()


def _temp_path(directory, step):
    global _temp_counter
    host = _host_tag()
    with _temp_lock:
        _temp_counter += 1
        n = _temp_counter
    return os.path.join(directory, f".snapshot-{step:012d}.pt.tmp-{host}-{os.getpid()}-{n}")


def _host_tag():
    import socket
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"


def _fsync_directory(directory):
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# Fault injection for the tests: called in the writing thread once the temp file is complete
# and synced, before it is renamed into place (tests/python: a crash during a background write).
_before_publish = None


def _publish(directory, step, header, payload_parts):
    """Writes header + payload to a temp file in `directory`, fsyncs it, renames it to its
    snapshot name and fsyncs the directory. Returns the final path."""
    os.makedirs(directory, exist_ok=True)
    temp = _temp_path(directory, step)
    final = os.path.join(directory, snapshot_name(step))
    try:
        with open(temp, "wb") as f:
            f.write(header)
            for part in payload_parts:
                f.write(part)
            f.flush()
            os.fsync(f.fileno())
        if _before_publish is not None:
            _before_publish()
        os.rename(temp, final)
    except BaseException:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        raise
    _fsync_directory(directory)
    return final


def _prune(directory, keep_last):
    """Deletes all but the newest `keep_last` snapshots, and temp files this host's dead
    processes left behind. Another writer on a shared directory may delete the same files."""
    for step in list_snapshots(directory)[keep_last:]:
        try:
            os.unlink(os.path.join(directory, snapshot_name(step)))
        except FileNotFoundError:
            pass
    host = _host_tag()
    for name in os.listdir(directory):
        m = _TEMP.match(name)
        if not m or m.group(2) != host or int(m.group(3)) == os.getpid():
            continue
        if not _pid_alive(int(m.group(3))):
            try:
                os.unlink(os.path.join(directory, name))
            except FileNotFoundError:
                pass


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SnapshotWrite:
    """One save_snapshot() call: `path` (None on a rank that does not write), `step`.
    wait() blocks until the file is published and returns its path, or raises the write's
    SnapshotError; done() says whether it finished."""

    def __init__(self, step, path):
        self.step = step
        self.path = path
        self._finished = threading.Event()
        self._error = None
        self._thread = None  # the writing thread (background saves); joined by wait()

    def done(self):
        return self._finished.is_set()

    def wait(self, timeout=None):
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"ddprun snapshot: writing {self.path} took longer than "
                                   f"{timeout} s")
        self._finished.wait(timeout)
        if self._error is not None:
            raise self._error
        return self.path

    def _run(self, directory, header_and_payload, keep_last):
        try:
            self._write(directory, header_and_payload, keep_last)
        except SnapshotError as e:
            self._error = e
        except Exception as e:  # nothing escapes the thread: the next wait raises it
            self._error = SnapshotError(f"{self.path}: write failed: {type(e).__name__}: {e}")
        finally:
            self._finished.set()

    def _write(self, directory, header_and_payload, keep_last):
        header, payload = header_and_payload()
        _publish(directory, self.step, header, [payload])
        _prune(directory, keep_last)


_pending = None             # the last SnapshotWrite started in the background, or None
_pending_lock = threading.Lock()
_atexit_registered = False


def save_snapshot(state, directory, step, keep_last=3, background=True, writer=None):
    """Saves `state` (anything torch.save takes: a dict of state dicts, tensors and numbers) as
    snapshot `step` in `directory`, this node's own disk, then deletes all but the newest
    `keep_last` snapshots there.

    Not collective: call it on every rank or only where LOCAL_RANK is 0, as the tutorial does.
    `writer` (default: LOCAL_RANK is 0 or unset) says whether this rank writes; other ranks
    return at once. Give writer=True on every rank whose directory is its own.

    With background=True (the default) the state is serialised in memory now (torch.save into
    a buffer: later changes to the tensors are not in the snapshot) and checked, written and
    synced by a thread; the next save_snapshot(), wait_for_snapshots() and the interpreter's
    exit wait for it. A crash mid-write leaves the previous snapshots intact. With
    background=False the file is published when the call returns.

    Returns a SnapshotWrite. Raises SnapshotError when a previous background write failed, or
    (background=False) when this one does."""
    import hashlib
    import torch
    step = _check_step(step)
    if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1:
        raise ValueError(f"ddprun.save_snapshot: keep_last must be an int >= 1, got {keep_last!r}")
    directory = os.fspath(directory)
    if writer is None:
        writer = os.environ.get("LOCAL_RANK", "0") in ("", "0")
    wait_for_snapshots()
    if not writer:
        handle = SnapshotWrite(step, None)
        handle._finished.set()
        return handle
    buffer = io.BytesIO()
    torch.save(state, buffer)
    payload = buffer.getbuffer()

    def header_and_payload():
        return encode_header(step, len(payload), hashlib.sha256(payload).hexdigest()), payload

    handle = SnapshotWrite(step, os.path.join(directory, snapshot_name(step)))
    if not background:
        handle._run(directory, header_and_payload, keep_last)
        handle.wait()
        return handle
    global _pending, _atexit_registered
    with _pending_lock:
        if not _atexit_registered:
            atexit.register(_wait_at_exit)
            _atexit_registered = True
        thread = threading.Thread(target=handle._run, args=(directory, header_and_payload,
                                                            keep_last),
                                  name=f"ddprun-snapshot-{step}")
        handle._thread = thread
        _pending = handle
        thread.start()
    return handle


def wait_for_snapshots(timeout=None):
    """Waits until the last background save_snapshot() is published. Raises its SnapshotError
    if it failed (once), TimeoutError after `timeout` seconds."""
    global _pending
    with _pending_lock:
        handle = _pending
    if handle is None:
        return
    try:
        handle.wait(timeout)
    finally:
        with _pending_lock:
            if _pending is handle and handle.done():
                _pending = None


def _wait_at_exit():
    try:
        wait_for_snapshots()
    except SnapshotError as e:
        sys.stderr.write(f"ddprun: the last snapshot was not saved: {e}\n")
        sys.stderr.flush()


# --- Loading ------------------------------------------------------------------------------------

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
