"""Tests of the ckptfs module that need no mount: info-line parsing, and
what it does off a ckptfs mount (refuses instead of pretending). The mount
side is tested end to end in tests/integration/checkpoint_commit_test.cc
and by the ckptfs.dcp tests here. Plain unittest: runs under pytest, or
with any Python 3 and PYTHONPATH=python: python3 -m unittest test_module.
"""

import errno
import os
import tempfile
import unittest

import ckptfs


class ParseInfoTest(unittest.TestCase):
    def test_full_line_with_reason_holding_spaces(self):
        info = ckptfs.parse_info(
            "name=step_100 state=aborted ranks=4 arrived=3 files=7 bytes=1234 "
            "declared_ms=10 first_commit_ms=20 ended_ms=30 timeout_s=5 errno=110 "
            "reason=rank 3 did not commit within 5 s\n")
        self.assertEqual(info["name"], "step_100")
        self.assertEqual(info["state"], "aborted")
        self.assertEqual(info["ranks"], 4)
        self.assertEqual(info["arrived"], 3)
        self.assertEqual(info["bytes"], 1234)
        self.assertEqual(info["ended_ms"], 30)
        self.assertEqual(info["errno"], errno.ETIMEDOUT)
        self.assertEqual(info["reason"], "rank 3 did not commit within 5 s")

    def test_escaped_name_and_empty_reason(self):
        info = ckptfs.parse_info(r"name=a\040b\075c state=committed ranks=1 reason=")
        self.assertEqual(info["name"], "a b=c")
        self.assertEqual(info["reason"], "")

    def test_garbage_is_refused(self):
        for line in ("", "garbage", "state=pending ranks=2", "name=a state=x ranks=two"):
            with self.assertRaises(ValueError, msg=line):
                ckptfs.parse_info(line)


    def test_a_checkpoint_being_removed(self):
        info = ckptfs.parse_info(
            "name=step_3 state=removing ranks=2 arrived=2 files=3 bytes=10 declared_ms=1 "
            "first_commit_ms=2 ended_ms=3 removing_ms=40 timeout_s=600 errno=0")
        self.assertEqual(info["state"], "removing")
        self.assertEqual(info["removing_ms"], 40)


class OffMountTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="ckptfs-py-test-")
        self.root = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_reads_say_nothing_is_there(self):
        self.assertIsNone(ckptfs.state(self.root))
        self.assertIsNone(ckptfs.info(self.root))
        self.assertIsNone(ckptfs.latest(self.root))
        self.assertEqual(ckptfs.checkpoints(self.root, all=True), [])

    def test_declare_and_commit_refuse_a_plain_directory(self):
        ckpt = os.path.join(self.root, "run", "step_1")
        with self.assertRaises(OSError) as cm:
            ckptfs.declare(ckpt, 2)
        self.assertEqual(cm.exception.errno, errno.ENOTSUP)
        self.assertIn("not on a ckptfs mount", str(cm.exception))
        self.assertFalse(os.path.exists(os.path.join(self.root, "run")))
        os.makedirs(ckpt)
        with self.assertRaises(OSError) as cm:
            ckptfs.commit(ckpt, 0)
        self.assertEqual(cm.exception.errno, errno.ENOTSUP)

    def test_missing_directory_names_the_errno(self):
        with self.assertRaises(OSError) as cm:
            ckptfs.commit(os.path.join(self.root, "missing"), 0)
        self.assertEqual(cm.exception.errno, errno.ENOENT)
        self.assertIn("commit of rank 0", str(cm.exception))
        self.assertIn("(ENOENT)", str(cm.exception))

    def test_latest_name_takes_a_file_name_and_needs_the_mount(self):
        for bad in ("a/b", ".", ".."):
            with self.assertRaises(ValueError, msg=bad):
                ckptfs.set_latest_name(self.root, bad)
        with self.assertRaises(OSError) as cm:
            ckptfs.set_latest_name(self.root, "ckptfs_latest")
        self.assertEqual(cm.exception.errno, errno.ENOTSUP)
        self.assertEqual(ckptfs.latest_name(self.root), "latest")

    def test_remove_needs_a_name_and_the_mount(self):
        with self.assertRaises(ValueError):
            ckptfs.remove("/")
        os.makedirs(os.path.join(self.root, "run", "step_1"))
        with self.assertRaises(OSError) as cm:
            ckptfs.remove(os.path.join(self.root, "run", "step_1"))
        self.assertEqual(cm.exception.errno, errno.ENOTSUP)
        # Nothing was set on the plain directory.
        self.assertEqual(os.listxattr(os.path.join(self.root, "run")), [])

    def test_a_refusal_says_which_permission_decides(self):
        e = ckptfs._error(errno.EACCES, "cannot remove /c/run/step_1", "/c/run/step_1")
        self.assertEqual(e.errno, errno.EACCES)
        self.assertIsInstance(e, PermissionError)
        self.assertIn("(EACCES)", str(e))
        self.assertIn("the right to delete everything in it", str(e))


if __name__ == "__main__":
    unittest.main()
