"""Every query torch 1.13's Python TCPStore can send, against the store under test.

Usage: tcpstore_client.py HOST PORT. Exits 0 and prints "tcpstore client ok" when every
answer is the one torch's own server would give; otherwise raises (exit 1) naming the check.
"""
import datetime
import signal
import sys

import torch.distributed as dist

signal.alarm(60)  # bound the whole script, whatever hangs

host, port = sys.argv[1], int(sys.argv[2])
seconds = datetime.timedelta(seconds=30)


def expect(what, got, want):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


# world_size=1 makes the client ADD "init/" first, as every c10d client with a world size does.
store = dist.TCPStore(host, port, 1, False, seconds)
store.set("k", "v1")
expect("get", store.get("k"), b"v1")
expect("add", store.add("n", 5), 5)
expect("add again", store.add("n", -2), 3)
expect("compare_set match", store.compare_set("k", "v1", "v2"), b"v2")
expect("compare_set mismatch", store.compare_set("k", "nope", "v3"), b"v2")
expect("compare_set absent", store.compare_set("absent", "x", "y"), b"x")
expect("compare_set create", store.compare_set("fresh", "", "z"), b"z")
store.wait(["k", "n"])
store.wait(["k"], datetime.timedelta(seconds=5))
expect("num_keys", store.num_keys(), 4)  # init/, k, n, fresh
expect("delete_key", store.delete_key("fresh"), True)
expect("delete_key again", store.delete_key("fresh"), False)
payload = bytes(range(256)) * 4096  # 1 MiB of every byte value
store.set("blob", payload)
expect("binary get", store.get("blob"), payload)

# A wait that times out: torch 1.13 raises on its side and tells the server nothing.
try:
    store.wait(["late"], datetime.timedelta(milliseconds=300))
    raise AssertionError("wait on a missing key returned")
except RuntimeError as e:
    expect("wait timeout message", "Socket Timeout" in str(e), True)
expect("num_keys after timeout", store.num_keys(), 4)  # init/, k, n, blob
# The key arrives late, through another client: the first one must not get a stray reply.
other = dist.TCPStore(host, port, None, False, seconds)
other.set("late", "now")
expect("num_keys from other", other.num_keys(), 5)
expect("get after late key", store.get("k"), b"v2")
expect("late key", store.get("late"), b"now")

# get() waits for the key for the store's timeout.
store.set_timeout(datetime.timedelta(milliseconds=300))
try:
    store.get("never")
    raise AssertionError("get of a missing key returned")
except RuntimeError:
    pass
store.set_timeout(seconds)
expect("num_keys at end", store.num_keys(), 5)
print("tcpstore client ok", flush=True)
