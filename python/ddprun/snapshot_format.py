"""The snapshot file (docs/snapshots.md, "The file format"): names, the versioned header, and
the checks every reader makes before trusting a byte; the temp files writers publish through.
Pure over bytes where it can be; standard library only (torch only in read_snapshot).
"""

import io
import os
import re
import threading

# hashlib, json and socket are imported where used: `import ddprun` stays cheap.

SNAPSHOT_FORMAT_VERSION = 1
_MAGIC = b"DDPRUN-PT-SNAPSHOT"
_MAX_HEADER_BYTES = 4096      # both header lines together; checked before anything is trusted
_MAX_STEP = 10 ** 12 - 1      # twelve digits in the name
_NAME = re.compile(r"^snapshot-(\d{12})\.pt$")
_TEMP = re.compile(r"^\.snapshot-(\d{12})\.pt\.tmp-(.+)-(\d+)-(\d+)$")
_READ_BYTES = 1 << 20


class SnapshotError(RuntimeError):
    """A snapshot could not be written, read or agreed on. The message names the file (or the
    ranks and what each found) and the problem."""


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


# --- Temp files: one per writer and publication, named so that a dead writer's can be found ---

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

