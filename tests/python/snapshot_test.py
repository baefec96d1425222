"""ddprun.save_snapshot / load_latest_snapshot with torch (run under each torch: tests/python/
CMakeLists.txt). Single-process: round trips, background writes that later changes to the
tensors do not reach, retention, a crash during a background write. Multi-process: four gloo
ranks as two "nodes" with a directory each (snapshot_worker.py, a FileStore: no ports), where
one node lacks the newest snapshot or holds a damaged copy and gets it from the other.

    python snapshot_test.py <repository root>
"""
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import unittest

ROOT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../..")
PACKAGE = os.path.join(ROOT, "python")
sys.path.insert(0, PACKAGE)

import torch  # noqa: E402

import ddprun  # noqa: E402
from ddprun import snapshot  # noqa: E402

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "snapshot_worker.py")
JOB_TIMEOUT_S = 120


def state(epoch, n=1000):
    return {"w": torch.arange(n, dtype=torch.float32) * epoch, "EPOCH": epoch}


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def flip_byte(path, index):
    data = bytearray(read_bytes(path))
    data[index] ^= 0xFF
    with open(path, "wb") as f:
        f.write(data)


def child_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("LOCAL_RANK", "RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = PACKAGE
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra)
    return env


class LocalTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.d = self.dir.name
        for key in ("LOCAL_RANK", "WORLD_SIZE"):
            os.environ.pop(key, None)

    def tearDown(self):
        ddprun.wait_for_snapshots()
        self.dir.cleanup()

    def test_nothing_saved_is_a_fresh_start(self):
        self.assertIsNone(ddprun.load_latest_snapshot(self.d))
        self.assertIsNone(ddprun.load_latest_snapshot(os.path.join(self.d, "never-made")))

    def test_the_newest_is_loaded(self):
        for epoch in (1, 2, 3):
            ddprun.save_snapshot(state(epoch), self.d, epoch)
        step, got = ddprun.load_latest_snapshot(self.d, with_step=True)
        self.assertEqual(step, 3)
        self.assertTrue(torch.equal(got["w"], state(3)["w"]))
        self.assertEqual(ddprun.load_latest_snapshot(self.d)["EPOCH"], 3)

    def test_a_background_save_holds_the_state_of_its_call(self):
        live = state(5)
        handle = ddprun.save_snapshot(live, self.d, 5)
        live["w"].add_(1000)  # training goes on while the thread writes
        self.assertEqual(handle.wait(), os.path.join(self.d, "snapshot-000000000005.pt"))
        self.assertTrue(torch.equal(ddprun.read_snapshot(handle.path)["w"], state(5)["w"]))

    def test_a_synchronous_save_is_published_on_return(self):
        handle = ddprun.save_snapshot(state(2), self.d, 2, background=False)
        self.assertTrue(handle.done())
        self.assertEqual(snapshot.verify_snapshot(handle.path)["step"], 2)

    def test_retention_keeps_exactly_k(self):
        for epoch in range(1, 8):
            ddprun.save_snapshot(state(epoch, 10), self.d, epoch, keep_last=3)
        ddprun.wait_for_snapshots()
        self.assertEqual(sorted(os.listdir(self.d)),
                         [f"snapshot-{s:012d}.pt" for s in (5, 6, 7)])

    def test_only_local_rank_0_writes_unless_told(self):
        os.environ["LOCAL_RANK"] = "1"
        try:
            handle = ddprun.save_snapshot(state(1), self.d, 1)
            self.assertIsNone(handle.wait())
            self.assertEqual(os.listdir(self.d), [])
            ddprun.save_snapshot(state(1), self.d, 1, writer=True).wait()
            self.assertEqual(snapshot.list_snapshots(self.d), [1])
        finally:
            del os.environ["LOCAL_RANK"]

    def test_a_damaged_newest_falls_back_to_the_previous(self):
        for epoch in (1, 2):
            ddprun.save_snapshot(state(epoch), self.d, epoch)
        ddprun.wait_for_snapshots()
        os.truncate(os.path.join(self.d, "snapshot-000000000002.pt"), 100)
        self.assertEqual(ddprun.load_latest_snapshot(self.d, with_step=True)[0], 1)

    def test_none_intact_is_an_error_naming_every_file(self):
        ddprun.save_snapshot(state(1), self.d, 1, background=False)
        path = os.path.join(self.d, "snapshot-000000000001.pt")
        flip_byte(path, -10)
        with self.assertRaisesRegex(ddprun.SnapshotError,
                                    "none is intact on any node(.|\n)*snapshot-000000000001.pt: "
                                    "checksum mismatch"):
            ddprun.load_latest_snapshot(self.d)

    def test_a_failed_background_write_is_raised_by_the_next_wait(self):
        blocker = os.path.join(self.d, "file")
        open(blocker, "w").close()
        ddprun.save_snapshot(state(1), os.path.join(blocker, "sub"), 1)
        with self.assertRaisesRegex(ddprun.SnapshotError,
                                    "sub/snapshot-000000000001.pt: write failed"):
            ddprun.wait_for_snapshots()
        ddprun.wait_for_snapshots()  # reported once

    def test_several_ranks_without_a_process_group_is_an_error(self):
        os.environ["WORLD_SIZE"] = "4"
        try:
            with self.assertRaisesRegex(ddprun.SnapshotError,
                                        "torch.distributed is not initialised"):
                ddprun.load_latest_snapshot(self.d)
        finally:
            del os.environ["WORLD_SIZE"]

    def test_a_crash_during_a_background_write_leaves_the_previous_snapshot(self):
        # The writer thread SIGKILLs its process once the temp file of step 2 is complete and
        # synced, just before the rename (snapshot_write._before_publish, the tests' fault hook).
        code = ("import os, signal, sys, torch, ddprun\n"
                "from ddprun import snapshot_write\n"
                "d = sys.argv[1]\n"
                "ddprun.save_snapshot({'w': torch.ones(10000)}, d, 1, background=False)\n"
                "snapshot_write._before_publish = lambda: os.kill(os.getpid(), signal.SIGKILL)\n"
                "ddprun.save_snapshot({'w': torch.zeros(10000)}, d, 2)\n"
                "ddprun.wait_for_snapshots()\n"
                "sys.exit(3)\n")
        run = subprocess.run([sys.executable, "-c", code, self.d], env=child_env(),
                             capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
        self.assertEqual(run.returncode, -signal.SIGKILL, run.stderr)
        leftovers = glob.glob(os.path.join(self.d, ".snapshot-000000000002.pt.tmp-*"))
        self.assertEqual(len(leftovers), 1, os.listdir(self.d))
        step, got = ddprun.load_latest_snapshot(self.d, with_step=True)
        self.assertEqual(step, 1)
        self.assertTrue(torch.equal(got["w"], torch.ones(10000)))
        ddprun.save_snapshot(state(3), self.d, 3).wait()  # a later save clears the dead temp
        self.assertEqual(sorted(os.listdir(self.d)),
                         ["snapshot-000000000001.pt", "snapshot-000000000003.pt"])

    def test_two_writers_sharing_a_directory_leave_intact_files_and_k_of_them(self):
        # Two nodes' local rank 0 on a shared file system (or two processes of one machine)
        # save the same steps into one directory at once.
        code = ("import sys, torch, ddprun\n"
                "for step in range(1, 7):\n"
                "    ddprun.save_snapshot({'w': torch.full((50000,), float(step))}, sys.argv[1],\n"
                "                         step, keep_last=2, writer=True)\n"
                "ddprun.wait_for_snapshots()\n")
        writers = [subprocess.Popen([sys.executable, "-c", code, self.d], env=child_env(),
                                    stderr=subprocess.PIPE, text=True) for _ in range(2)]
        for w in writers:
            _, err = w.communicate(timeout=JOB_TIMEOUT_S)
            self.assertEqual(w.returncode, 0, err)
        self.assertEqual(sorted(os.listdir(self.d)),
                         ["snapshot-000000000005.pt", "snapshot-000000000006.pt"])
        for step in (5, 6):
            got = ddprun.read_snapshot(os.path.join(self.d, snapshot.snapshot_name(step)))
            self.assertTrue(torch.equal(got["w"], torch.full((50000,), float(step))))


class TwoNodesTest(unittest.TestCase):
    """Ranks 0 and 1 are node A (directory a/), ranks 2 and 3 node B (b/)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        self.a = os.path.join(self.root, "a")
        self.b = os.path.join(self.root, "b")
        os.makedirs(self.a)
        os.makedirs(self.b)

    def tearDown(self):
        self.tmp.cleanup()

    def save(self, directory, *epochs):
        for epoch in epochs:
            ddprun.save_snapshot(state(epoch), directory, epoch, background=False, writer=True)

    def run_job(self, chunk_bytes=1000):
        """Runs the four ranks; returns their results by rank."""
        out = os.path.join(self.root, f"out{len(os.listdir(self.root))}")
        os.makedirs(out)
        store = os.path.join(out, "store")
        procs = [subprocess.Popen([sys.executable, WORKER, store, str(rank), "4",
                                   self.a if rank < 2 else self.b, out, str(chunk_bytes)],
                                  env=child_env(LOCAL_RANK=str(rank % 2)),
                                  stderr=subprocess.PIPE, text=True)
                 for rank in range(4)]
        try:
            errs = [p.communicate(timeout=JOB_TIMEOUT_S)[1] for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        for rank, p in enumerate(procs):
            self.assertEqual(p.returncode, 0, f"rank {rank}: {errs[rank]}")
        results = []
        for rank in range(4):
            with open(os.path.join(out, f"rank_{rank}.json")) as f:
                results.append(json.load(f))
        return results

    def expect_step(self, results, step):
        expected = state(step)
        digest = __import__("hashlib").sha256(repr(expected["w"].tolist()).encode()).hexdigest()
        for r in results:
            self.assertNotIn("error", r)
            self.assertEqual(r["step"], step, r)
            self.assertEqual(r["epoch"], step, r)
            self.assertEqual(r["digest"], digest, r)

    def test_an_empty_node_receives_the_newest_from_its_peer(self):
        self.save(self.a, 1, 2)
        self.expect_step(self.run_job(), 2)  # 1000-byte chunks: many broadcasts
        self.assertEqual(snapshot.list_snapshots(self.b), [2])
        self.assertEqual(read_bytes(os.path.join(self.a, "snapshot-000000000002.pt")),
                         read_bytes(os.path.join(self.b, "snapshot-000000000002.pt")))

    def test_a_truncated_copy_is_replaced_by_the_peers(self):
        self.save(self.a, 1, 2)
        self.save(self.b, 1, 2)
        os.truncate(os.path.join(self.b, "snapshot-000000000002.pt"), 300)
        self.expect_step(self.run_job(), 2)
        snapshot.verify_snapshot(os.path.join(self.b, "snapshot-000000000002.pt"))

    def test_a_corrupted_copy_on_the_first_node_is_replaced(self):
        self.save(self.a, 1, 2, 3)
        self.save(self.b, 1, 2, 3)
        path = os.path.join(self.a, "snapshot-000000000003.pt")
        flip_byte(path, os.path.getsize(path) // 2)
        self.expect_step(self.run_job(chunk_bytes=1 << 20), 3)
        snapshot.verify_snapshot(path)

    def test_the_newest_intact_anywhere_wins_over_older_local_ones(self):
        self.save(self.a, 1)
        self.save(self.b, 1, 2, 3)
        os.truncate(os.path.join(self.b, "snapshot-000000000003.pt"), 10)
        self.expect_step(self.run_job(), 2)
        self.assertEqual(snapshot.list_snapshots(self.a), [2, 1])

    def test_no_snapshot_anywhere_is_a_fresh_start_on_every_rank(self):
        for r in self.run_job():
            self.assertIsNone(r["step"], r)

    def test_none_intact_anywhere_is_the_same_clear_error_on_every_rank(self):
        self.save(self.a, 4)
        self.save(self.b, 4)
        os.truncate(os.path.join(self.a, "snapshot-000000000004.pt"), 200)
        path = os.path.join(self.b, "snapshot-000000000004.pt")
        flip_byte(path, -1)
        results = self.run_job()
        messages = {r.get("error") for r in results}
        self.assertEqual(len(messages), 1, messages)
        message = messages.pop()
        self.assertIn("snapshots exist but none is intact on any node", message)
        self.assertIn("a/snapshot-000000000004.pt: truncated", message)
        self.assertIn("b/snapshot-000000000004.pt: checksum mismatch", message)

    def test_an_unreadable_directory_is_the_same_error_on_every_rank(self):
        self.save(self.a, 1)
        os.rmdir(self.b)
        with open(self.b, "w") as f:  # not a directory: listing it fails on node B only
            f.write("x")
        messages = {r.get("error") for r in self.run_job()}
        self.assertEqual(len(messages), 1, messages)
        message = messages.pop()
        self.assertIn("a snapshot directory cannot be read", message)
        self.assertIn("rank 2: " + self.b + ": cannot list", message)


if __name__ == "__main__":
    unittest.main(verbosity=2)
