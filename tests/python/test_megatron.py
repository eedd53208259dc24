"""ckptfs.megatron: a Megatron-Core async distributed checkpoint, scheduled
on Megatron-Core's own AsyncCallsQueue (a forked writer per save), is
committed by the finalize function ckptfs.megatron adds, before the
finalize functions that follow it (Megatron-LM's tracker file); keep=K gives
older checkpoints' space back; a failed background write is never
committed; NVIDIA Resiliency Extension's queue runs the same finalize
function. Two-rank gloo jobs of megatron_main.py on a real ckptfs mount."""

import errno
import os
import warnings

import pytest

import ckptfs
import ckptfs.megatron
from framework_support import wait_for_space_back
from ranks import require_all_ok, run_ranks

WORLD = 2
# One copy per chunk: the space checks compare the chunk bytes the storage
# servers hold with the sizes of the files the mount shows.
CLUSTER_OPTIONS = {"replicas": 1}


def run(scenario, run_dir, **args):
    return run_ranks(WORLD, scenario, script="megatron_main.py", run=run_dir, timeout=180,
                     **args)


def test_async_save_commits_in_its_finalize_before_the_tracker(cluster, run_dir):
    reports = require_all_ok(run("save", run_dir, saves=3, keep=2))
    for r in reports:
        for iteration in ("1", "2", "3"):
            # Pending while the forked writer runs; committed when the
            # finalize function after ckptfs's (the tracker's) runs.
            assert r["states"][iteration] == {"scheduled": "pending",
                                              "at_tracker": "committed"}, r
        assert r["tracker"] == "3"
        assert r["latest"] == os.path.join(run_dir, "iter_0000003")
        assert r["loaded_equal"] and r["loaded_iteration"] == 3, r
    assert [c["name"] for c in ckptfs.checkpoints(run_dir, all=True)] == [
        "iter_0000002", "iter_0000003"]
    newest = os.path.join(run_dir, "iter_0000003")
    info = ckptfs.info(newest)
    assert info["ranks"] == WORLD and info["arrived"] == WORLD
    for name in (".metadata", "metadata.json", "common.pt"):
        assert name in os.listdir(newest)
    stored, visible = wait_for_space_back(cluster)
    assert stored <= visible + (256 << 10), (stored, visible)


def test_failed_background_write_is_never_committed(run_dir):
    results = run("failing_write", run_dir, failing_rank=1)
    reports = require_all_ok(results)
    for r in reports:
        assert r["raised"] and "CheckpointException" in r["error"], r
        assert r["exists"] is False
    assert "simulated: fsync failed" in reports[0]["error"]  # the coordinator's report
    assert sum(r["removed"] for r in reports) == 1  # abort() on both; one removed it
    assert ckptfs.checkpoints(run_dir, all=True) == []
    assert ckptfs.latest(run_dir) is None


def test_nvidia_resiliency_ext_queue_runs_the_same_commit(run_dir):
    pytest.importorskip("nvidia_resiliency_ext.checkpointing.async_ckpt.core", reason=(
        "nvidia-resiliency-ext is installed without its dependencies: pip install --no-deps "
        "-c python/constraints.txt -r python/requirements-test-no-deps.txt"))
    for r in require_all_ok(run("nvrx", run_dir, step=5)):
        assert r == {"scheduled": "pending", "after": "committed", "loaded_equal": True}, r
    assert ckptfs.latest(run_dir) == os.path.join(run_dir, "step_5")


def test_off_the_mount_and_bad_arguments(tmp_path, run_dir):
    off = tmp_path / "iter_0000001"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ckptfs.megatron.prepare(off)
    assert any("not on a ckptfs mount" in str(w.message) for w in caught)
    assert off.is_dir()
    ckptfs.megatron.commit_fn(off)()  # nothing to commit
    with pytest.raises(OSError) as e:
        ckptfs.megatron.prepare(off, require_ckptfs=True)
    assert e.value.errno == errno.ENOTSUP
    with pytest.raises(ValueError, match="keep at least 1"):
        ckptfs.megatron.prepare(os.path.join(run_dir, "iter_0000001"), keep=0)
    plain = os.path.join(run_dir, "iter_0000002")
    os.makedirs(os.path.join(plain, "sub"))
    with pytest.raises(RuntimeError, match="is not a ckptfs checkpoint"):
        ckptfs.megatron.prepare(plain)
    # An empty directory made beforehand (Megatron-LM makes it) is adopted.
    empty = os.path.join(run_dir, "iter_0000003")
    os.mkdir(empty)
    ckptfs.megatron.prepare(empty)
    ckptfs.megatron.commit_fn(empty)()
    assert ckptfs.state(empty) == "committed"
    assert ckptfs.megatron.abort(empty) is False  # only pending ones
