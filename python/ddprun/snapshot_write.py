"""Saving snapshots (docs/snapshots.md, "Saving"): the state serialised in memory, then
checked, written to a temp file, synced, renamed into place and pruned, by one owned thread per
process at a time; wait_for_snapshots() and the interpreter's exit wait for it.
"""

import atexit
import io
import os
import sys
import threading

from .snapshot_format import (_TEMP, SnapshotError, _check_step, _fsync_directory, _host_tag,
                              _temp_path, encode_header, list_snapshots, snapshot_name)

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

