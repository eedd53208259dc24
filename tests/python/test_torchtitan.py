"""ckptfs.torchtitan: torchtitan's CheckpointManager, as
CkptfsCheckpointManager, commits every step-N it saves (synchronously, or
when its async save ends), a restarted job loads the newest committed one,
keep_latest_k gives the space of older ones back, and torchtitan's own
purge (shutil.rmtree) works on committed checkpoints. Two-rank gloo jobs of
torchtitan_main.py on a real ckptfs mount."""

import os
import queue

import pytest

pytest.importorskip("torchtitan.components.checkpoint", reason=(
    "torchtitan is installed without its dependencies: pip install --no-deps "
    "-c python/constraints.txt -r python/requirements-test-no-deps.txt"))

import ckptfs  # noqa: E402
from framework_support import wait_for_space_back  # noqa: E402
from ranks import require_all_ok, run_ranks  # noqa: E402

WORLD = 2
# One copy per chunk: the space checks compare the chunk bytes the storage
# servers hold with the sizes of the files the mount shows.
CLUSTER_OPTIONS = {"replicas": 1}


def train(run_dir, **args):
    reports = require_all_ok(run_ranks(WORLD, "train", script="torchtitan_main.py",
                                       run=run_dir, timeout=240, **args))
    assert reports[0]["digest"] == reports[1]["digest"]
    return reports


def committed(states):
    return {int(k): v for k, v in states.items()}


def test_saves_commit_before_save_returns_and_a_restart_loads_the_newest(cluster, run_dir):
    first = train(run_dir, steps=6, interval=2, async_mode="disabled", keep_latest_k=2)
    for r in first:
        assert r["start"]["loaded"] is False
        assert committed(r["right_after"]) == {2: "committed", 4: "committed", 6: "committed"}
        assert committed(r["after_wait"]) == {4: "committed", 6: "committed"}  # keep 2
    folder = first[0]["folder"]
    assert ckptfs.latest(folder) == os.path.join(folder, "step-6")
    info = ckptfs.info(os.path.join(folder, "step-6"))
    assert info["ranks"] == WORLD and info["arrived"] == WORLD
    assert ".metadata" in os.listdir(os.path.join(folder, "step-6"))
    stored, visible = wait_for_space_back(cluster)
    assert stored <= visible + (256 << 10), (stored, visible)

    # An interrupted save of step 8: pending, so not a step to load.
    torn = os.path.join(folder, "step-8")
    ckptfs.declare(torn, WORLD)
    with open(os.path.join(torn, ".metadata"), "wb") as f:
        f.write(b"torn")

    second = train(run_dir, steps=8, interval=2, async_mode="disabled", keep_latest_k=2)
    for r in second:
        assert r["start"] == {"loaded": True, "step": 6, "digest": first[0]["digest"]}, r
        assert committed(r["after_wait"]) == {6: "committed", 8: "committed"}
    assert ckptfs.latest(folder) == torn


def test_async_saves_commit_when_they_end(cluster, run_dir):
    reports = train(run_dir, steps=6, interval=1, async_mode="async", keep_latest_k=2)
    for r in reports:
        right_after = committed(r["right_after"])
        assert sorted(right_after) == [1, 2, 3, 4, 5, 6]
        # save() returned while step 1 was still being written in the
        # background; the last step saves synchronously.
        assert right_after[1] != "committed" and right_after[6] == "committed", right_after
        assert committed(r["after_wait"]) == {5: "committed", 6: "committed"}
    stored, visible = wait_for_space_back(cluster)
    assert stored <= visible + (256 << 10), (stored, visible)


def test_torchtitans_own_purge_frees_committed_checkpoints(cluster, run_dir):
    # What CheckpointManager runs without the ckptfs manager: its purge
    # thread, removing with torchtitan.tools.filesystem.rmtree
    # (shutil.rmtree with ignore_errors=True).
    from torchtitan.components.checkpointer.base import purge_thread
    from torchtitan.tools import filesystem
    paths = []
    for step in (10, 20, 30):
        path = os.path.join(run_dir, "step-%d" % step)
        ckptfs.declare(path, 1)
        with open(os.path.join(path, "__0_0.distcp"), "wb") as f:
            f.write(os.urandom(2 << 20))
        ckptfs.commit(path, 0)
        paths.append(path)
    purge = queue.Queue()
    for path in paths[:2]:
        purge.put(path)
    purge.put(None)
    purge_thread(purge, filesystem.rmtree)
    assert [c["name"] for c in ckptfs.checkpoints(run_dir, all=True)] == ["step-30"]
    assert ckptfs.latest(run_dir) == paths[2]
    stored, visible = wait_for_space_back(cluster)
    assert stored <= visible + (256 << 10), (stored, visible)
