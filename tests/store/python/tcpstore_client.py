"""Every query the Python TCPStore of the torch running this can send, against the store under
test: torch 1.13's (set, get, add, compare_set, wait, delete_key, num_keys, set_timeout) and,
under torch 2.x, also check, append, multi_get, multi_set, wait's timeout with CANCEL_WAIT, the
queues, list_keys and barrier, each from a client made with use_libuv=True and one with False.

Usage: tcpstore_client.py HOST PORT. Exits 0 and prints "tcpstore client ok" when every
answer is the one torch's own server would give; otherwise raises (exit 1) naming the check.
"""
import datetime
import signal
import sys
import threading

import torch
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

# A wait that times out: torch 1.13 raises on its side and tells the server nothing; torch
# 2.x sends CANCEL_WAIT and reads the server's WAIT_CANCELED.
try:
    store.wait(["late"], datetime.timedelta(milliseconds=300))
    raise AssertionError("wait on a missing key returned")
except RuntimeError as e:
    expect("wait timeout message", "Socket Timeout" in str(e) or "timeout" in str(e).lower(), True)
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

if int(torch.__version__.split(".")[0]) >= 2:
    for libuv in (True, False):
        # use_libuv picks the server's backend in torch; a client speaks the same protocol either
        # way (with False it refuses queue calls itself).
        c = dist.TCPStore(host, port, None, False, seconds, use_libuv=libuv)
        p = f"libuv{int(libuv)}/"
        expect("check missing", c.check([p + "a"]), False)
        c.set(p + "a", "1")
        expect("check present", c.check([p + "a"]), True)
        c.append(p + "a", "23")
        expect("append", c.get(p + "a"), b"123")
        c.multi_set([p + "m1", p + "m2"], ["x", b"\x00\xff"])
        expect("multi_get", c.multi_get([p + "m1", p + "m2", p + "a"]), [b"x", b"\x00\xff", b"123"])
        if libuv:  # the client itself refuses queues with use_libuv=False (torch 2.15)
            c.queue_push(p + "q", "first")
            c.queue_push(p + "q", b"second")
            expect("queue_len", c.queue_len(p + "q"), 2)
            expect("queue_pop", c.queue_pop(p + "q"), b"first")
            expect("queue_pop non-blocking", c.queue_pop(p + "q", block=False), b"second")
            expect("queue_len empty", c.queue_len(p + "q"), 0)
            # A blocking pop waits for the push of another client.
            popped = []
            t = threading.Thread(target=lambda: popped.append(c.queue_pop(p + "q2")))
            t.start()
            other.queue_push(p + "q2", "pushed later")
            t.join(30)
            expect("blocking queue_pop", popped, [b"pushed later"])
        keys = c.list_keys()
        for k in (p + "a", p + "m1", p + "m2", "k", "n", "blob", "late"):
            expect(f"list_keys has {k}", k in keys, True)
        expect("list_keys has no queue", p + "q" in keys, False)
        # barrier: the last of world_size callers releases the others; a later call returns at
        # once; one that times out raises and is cancelled on the server.
        released = []
        t = threading.Thread(target=lambda: (other.barrier(p + "b", 2), released.append(1)))
        t.start()
        c.barrier(p + "b", 2)
        t.join(30)
        expect("barrier released the first caller", released, [1])
        c.barrier(p + "b", 2)
        expect("barrier counter", c.get(p + "b"), b"3")
        try:
            c.barrier(p + "never", 2, datetime.timedelta(milliseconds=300))
            raise AssertionError("barrier with one of two callers returned")
        except RuntimeError as e:
            expect("barrier timeout message", "timeout" in str(e).lower(), True)
        expect("client usable after a cancelled barrier", c.get(p + "a"), b"123")
        expect("delete_key", c.delete_key(p + "a"), True)
    print("torch 2 queries ok", flush=True)
print("tcpstore client ok", flush=True)
