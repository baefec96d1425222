"""ddprun.snapshot's file format, checks and retention, with plain Python (no torch): headers
encoded and parsed, every damage a file can suffer named, the newest K kept.

    python3 snapshot_format_test.py <repository root>
"""
import hashlib
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../..")
sys.path.insert(0, os.path.join(ROOT, "python"))

from ddprun import snapshot_format as snapshot  # noqa: E402
from ddprun import snapshot_write  # noqa: E402


def write_file(directory, step, payload=b"payload bytes", name=None):
    header = snapshot.encode_header(step, len(payload), hashlib.sha256(payload).hexdigest())
    path = os.path.join(directory, name or snapshot.snapshot_name(step))
    with open(path, "wb") as f:
        f.write(header + payload)
    return path


class HeaderTest(unittest.TestCase):
    def test_round_trip(self):
        header = snapshot.encode_header(42, 7, "a" * 64)
        self.assertTrue(header.startswith(b"DDPRUN-PT-SNAPSHOT 1\n"))
        meta, length = snapshot.parse_header(header + b"payload")
        self.assertEqual(length, len(header))
        self.assertEqual(meta, {"step": 42, "payload_bytes": 7, "sha256": "a" * 64})

    def test_another_version_is_named(self):
        header = snapshot.encode_header(1, 0, "a" * 64).replace(b" 1\n", b" 7\n", 1)
        with self.assertRaisesRegex(ValueError, "format version 7, this ddprun reads version 1"):
            snapshot.parse_header(header)

    def test_not_a_snapshot(self):
        with self.assertRaisesRegex(ValueError, "not a ddprun snapshot"):
            snapshot.parse_header(b"PK\x03\x04 a zip file\n")
        with self.assertRaisesRegex(ValueError, "not a ddprun snapshot"):
            snapshot.parse_header(b"\x80\x02")

    def test_incomplete_header_is_truncated(self):
        header = snapshot.encode_header(1, 0, "a" * 64)
        for cut in (5, len(b"DDPRUN-PT-SNAPSHOT 1\n") + 3, len(header) - 1):
            with self.assertRaisesRegex(ValueError, "truncated"):
                snapshot.parse_header(header[:cut])

    def test_malformed_json(self):
        with self.assertRaisesRegex(ValueError, "malformed header"):
            snapshot.parse_header(b"DDPRUN-PT-SNAPSHOT 1\n{\"step\": 1}\n")
        with self.assertRaisesRegex(ValueError, "malformed header"):
            snapshot.parse_header(b"DDPRUN-PT-SNAPSHOT 1\nnot json\n")

    def test_a_header_longer_than_the_limit_is_refused_unread(self):
        with self.assertRaisesRegex(ValueError, "truncated"):
            snapshot.parse_header(b"DDPRUN-PT-SNAPSHOT 1\n" + b" " * 10000 + b"{}\n")

    def test_steps_are_checked(self):
        self.assertEqual(snapshot.snapshot_name(8), "snapshot-000000000008.pt")
        for bad, error in ((-1, ValueError), (10 ** 12, ValueError), (True, TypeError),
                           (1.0, TypeError)):
            with self.assertRaises(error):
                snapshot.snapshot_name(bad)


class VerifyTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.d = self.dir.name

    def tearDown(self):
        self.dir.cleanup()

    def test_an_intact_file_verifies(self):
        meta = snapshot.verify_snapshot(write_file(self.d, 3))
        self.assertEqual(meta["step"], 3)

    def test_a_flipped_byte_is_a_checksum_mismatch(self):
        path = write_file(self.d, 3)
        data = bytearray(open(path, "rb").read())
        data[-2] ^= 0x10
        open(path, "wb").write(data)
        with self.assertRaisesRegex(snapshot.SnapshotError,
                                    "snapshot-000000000003.pt: checksum mismatch"):
            snapshot.verify_snapshot(path)

    def test_a_short_file_is_truncated(self):
        path = write_file(self.d, 3, b"x" * 100)
        os.truncate(path, os.path.getsize(path) - 40)
        with self.assertRaisesRegex(snapshot.SnapshotError,
                                    "truncated: header promises 100 payload bytes, file has 60"):
            snapshot.verify_snapshot(path)

    def test_a_long_file_is_refused(self):
        path = write_file(self.d, 3)
        with open(path, "ab") as f:
            f.write(b"more")
        with self.assertRaisesRegex(snapshot.SnapshotError, "too long"):
            snapshot.verify_snapshot(path)

    def test_an_empty_file(self):
        path = os.path.join(self.d, snapshot.snapshot_name(3))
        open(path, "wb").close()
        with self.assertRaisesRegex(snapshot.SnapshotError, "truncated: no complete header"):
            snapshot.verify_snapshot(path)

    def test_a_file_under_another_steps_name(self):
        path = write_file(self.d, 3, name=snapshot.snapshot_name(4))
        with self.assertRaisesRegex(snapshot.SnapshotError, "holds step 3, not its name's"):
            snapshot.verify_snapshot(path)

    def test_a_missing_file_is_named(self):
        with self.assertRaisesRegex(snapshot.SnapshotError, "nothing.pt: cannot open"):
            snapshot.verify_snapshot(os.path.join(self.d, "nothing.pt"))


class RetentionTest(unittest.TestCase):
    def test_keeps_the_newest_k_and_ignores_other_files(self):
        with tempfile.TemporaryDirectory() as d:
            for step in (1, 5, 2, 9, 7):
                write_file(d, step)
            open(os.path.join(d, "notes.txt"), "w").close()
            self.assertEqual(snapshot.list_snapshots(d), [9, 7, 5, 2, 1])
            snapshot_write._prune(d, 3)
            self.assertEqual(snapshot.list_snapshots(d), [9, 7, 5])
            self.assertTrue(os.path.exists(os.path.join(d, "notes.txt")))

    def test_a_dead_writers_temp_file_is_removed_a_live_ones_kept(self):
        with tempfile.TemporaryDirectory() as d:
            dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                                  capture_output=True, text=True, check=True)
            host = snapshot._host_tag()
            stale = os.path.join(d, f".snapshot-000000000004.pt.tmp-{host}-{dead.stdout.strip()}-1")
            live = os.path.join(d, f".snapshot-000000000004.pt.tmp-{host}-{os.getppid()}-1")
            other = os.path.join(
                d, f".snapshot-000000000004.pt.tmp-elsewhere-{dead.stdout.strip()}-1")
            for path in (stale, live, other):
                open(path, "w").close()
            snapshot_write._prune(d, 3)
            self.assertFalse(os.path.exists(stale))
            self.assertTrue(os.path.exists(live))
            self.assertTrue(os.path.exists(other), "another host's writer may still be writing")

    def test_listing_a_missing_directory(self):
        self.assertEqual(snapshot.list_snapshots("/nonexistent/ddprun/snapshots"), [])


class ImportTest(unittest.TestCase):
    def test_import_ddprun_imports_no_torch(self):
        code = "import sys, ddprun; print('torch' in sys.modules, 'numpy' in sys.modules)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True,
                             env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "python")})
        self.assertEqual(out.stdout.strip(), "False False")


if __name__ == "__main__":
    unittest.main(verbosity=2)
