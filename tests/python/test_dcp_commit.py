"""ckptfs.dcp: CkptfsWriter's dcp.save and dcp.async_save commit the
checkpoint by themselves, a failing or dying rank leaves it uncommitted,
and CkptfsReader loads committed checkpoints only. Rank processes are
gloo jobs of 4 ranks on a real ckptfs mount (rank_main.py)."""

import errno
import os
import threading
import time
import warnings

import pytest
import torch
import torch.distributed.checkpoint as dcp

import ckptfs
from ckptfs.dcp import CkptfsReader, CkptfsWriter, NotCommittedError
from ranks import require_all_ok, run_ranks

WORLD = 4
MIB = 8  # per rank: its file spans several 4 MiB chunks
ASYNC_MIB = 24  # long enough a save for training steps beside it


def save_step(run_dir, step, mode="sync", mib=MIB, **args):
    """Every rank saves step_`step` (or each of `steps=[...]`) with CkptfsWriter."""
    return require_all_ok(run_ranks(WORLD, "ckptfs", run=run_dir, step=step, mode=mode,
                                    mib=mib, **args))


def wait_for_state(path, wanted, timeout=60):
    deadline = time.monotonic() + timeout
    state = None
    while time.monotonic() < deadline:
        try:
            state = ckptfs.state(path)
        except FileNotFoundError:
            state = "gone"
        if state in wanted:
            return state
        time.sleep(0.2)
    raise AssertionError("%s stayed %s, not %s" % (path, state, wanted))


def test_save_commits_before_it_returns_and_reader_loads_latest(run_dir):
    reports = save_step(run_dir, None, steps=[100, 200])
    for rank, report in enumerate(reports):
        # Read by each rank right after its dcp.save returned.
        assert report["after_saves"] == [
            {"state": "committed", "latest": os.path.join(run_dir, "step_100")},
            {"state": "committed", "latest": os.path.join(run_dir, "step_200")},
        ], rank
        assert report["differences"] == [], rank  # loaded from the run's latest
    step = os.path.join(run_dir, "step_100")
    info = ckptfs.info(step)
    assert info["ranks"] == WORLD and info["arrived"] == WORLD
    assert os.path.exists(os.path.join(step, ".metadata"))
    # Committed means immutable: nothing in it can be changed.
    with pytest.raises(OSError) as e:
        open(os.path.join(step, "extra"), "wb")
    assert e.value.errno == errno.EROFS

    loaded = require_all_ok(run_ranks(WORLD, "ckptfs_load", path=step, mib=MIB))
    for report in loaded:
        assert report["raised"] is False and report["differences"] == []
        assert report["resolved"] == step


@pytest.mark.parametrize("mode", ["async", "async_process"])
def test_async_save_commits_when_the_background_save_ends(run_dir, mode):
    reports = save_step(run_dir, None, steps=[100, 200], mode=mode, mib=ASYNC_MIB)
    for rank, report in enumerate(reports):
        assert [a["state"] for a in report["after_saves"]] == ["committed"] * 2, rank
        assert report["steps_while_saving"] > 0, "rank %d: training did not go on" % rank
        assert report["differences"] == [], rank


def test_async_save_error_surfaces_from_the_future(run_dir):
    save_step(run_dir, 100, load=False)
    # Saving again under a committed name: every rank's future raises.
    reports = save_step(run_dir, 100, mode="async", catch=True)
    for rank, report in enumerate(reports):
        assert report["raised"], rank
        assert "already a committed checkpoint" in report["error"], report["error"]
    assert ckptfs.state(os.path.join(run_dir, "step_100")) == "committed"


@pytest.mark.parametrize("how", ["raise", "exit"])
def test_failing_rank_leaves_no_committed_checkpoint(run_dir, how):
    save_step(run_dir, 100, load=False)
    good = os.path.join(run_dir, "step_100")
    failed = os.path.join(run_dir, "step_200")
    results = run_ranks(WORLD, "ckptfs_failure", run=run_dir, step=200, mode="sync",
                        mib=MIB, failing_rank=2, how=how, commit_timeout_s=3,
                        teardown=False, timeout=180)
    assert results[2].returncode == (17 if how == "exit" else 0), results[2]
    for r in results:
        if r.rank == 2 and how == "exit":
            continue
        assert r.report is not None, r
        assert r.report["raised"], r
        if how == "raise":
            assert "simulated: no space left" in r.report["error"] or r.rank != 2, r
    # A raising rank removes the pending checkpoint; a dead one leaves the
    # others' arrivals to the commit timeout, which aborts it.
    assert wait_for_state(failed, ("gone", "aborted")) in ("gone", "aborted")
    assert ckptfs.latest(run_dir) == good
    assert [c["name"] for c in ckptfs.checkpoints(run_dir)] == ["step_100"]
    with pytest.raises((NotCommittedError, FileNotFoundError)):
        CkptfsReader(failed)
    # The name can be saved again, the failed attempt's leftovers cleared.
    reports = save_step(run_dir, 200, load=False)
    assert all(r["after_save"]["state"] == "committed" for r in reports)
    assert "partial_2" not in os.listdir(failed)


@pytest.mark.parametrize("left", ["arrival", "files"])
def test_save_clears_a_stale_pending_attempt(run_dir, left):
    """A pending checkpoint under the name, from an attempt that died: one
    rank had arrived, or none had but files were written. The save removes
    it and declares anew; nothing of it ends up in the commit."""
    step = os.path.join(run_dir, "step_300")
    ckptfs.declare(step, WORLD)
    with open(os.path.join(step, "stale"), "wb") as f:
        f.write(b"from an attempt that died")
    outcome = {}

    def stale_rank():
        try:
            ckptfs.commit(step, 1)
            outcome["result"] = "committed"
        except OSError as e:
            outcome["result"] = e.errno

    waiter = threading.Thread(target=stale_rank, daemon=True)
    if left == "arrival":
        waiter.start()
        deadline = time.monotonic() + 30
        while ckptfs.info(step)["arrived"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
    reports = save_step(run_dir, 300, load=False)
    assert all(r["after_save"]["state"] == "committed" for r in reports)
    assert "stale" not in os.listdir(step)
    if left == "arrival":
        waiter.join(30)
        assert outcome.get("result") not in (None, "committed"), outcome


def test_save_uses_an_empty_checkpoint_declared_ahead(run_dir):
    step = os.path.join(run_dir, "step_400")
    ckptfs.declare(step, WORLD)  # a launcher declaring before the ranks start
    ino = ckptfs.info(step)["ino"]
    reports = save_step(run_dir, 400, load=False)
    assert all(r["after_save"]["state"] == "committed" for r in reports)
    assert ckptfs.info(step)["ino"] == ino


def test_keep_applies_retention_at_each_commit(run_dir):
    save_step(run_dir, None, steps=[1, 2, 3], load=False, keep=2)
    assert [c["name"] for c in ckptfs.checkpoints(run_dir)] == ["step_2", "step_3"]


def test_reader_refuses_pending_and_aborted_checkpoints(run_dir):
    pending = os.path.join(run_dir, "step_1")
    ckptfs.declare(pending, 2)
    with pytest.raises(NotCommittedError, match="pending checkpoint"):
        CkptfsReader(pending)

    aborted = os.path.join(run_dir, "step_2")
    ckptfs.declare(aborted, 2, timeout_s=1)
    with pytest.raises(TimeoutError):
        ckptfs.commit(aborted, 0)
    with pytest.raises(NotCommittedError, match="aborted checkpoint"):
        CkptfsReader(aborted)

    # A run directory with nothing committed in it.
    with pytest.raises(FileNotFoundError, match="neither a committed checkpoint"):
        CkptfsReader(run_dir)


def test_single_process_save_without_a_process_group(run_dir):
    state = {"w": torch.arange(1000, dtype=torch.float32), "step": torch.tensor(7)}
    step = os.path.join(run_dir, "step_7")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DCP's "torch.distributed is disabled"
        dcp.save(state, storage_writer=CkptfsWriter(step))
        assert ckptfs.state(step) == "committed"
        back = {"w": torch.zeros(1000), "step": torch.tensor(0)}
        reader = CkptfsReader(run_dir)
        dcp.load(back, storage_reader=reader)
        assert torch.equal(back["w"], state["w"]) and back["step"].item() == 7

        # A reader made before a newer commit loads the newer one.
        newer = {"w": state["w"] * 2, "step": torch.tensor(8)}
        dcp.save(newer, storage_writer=CkptfsWriter(os.path.join(run_dir, "step_8")))
        dcp.load(back, storage_reader=reader)
    assert reader.resolved == os.path.join(run_dir, "step_8")
    assert torch.equal(back["w"], newer["w"]) and back["step"].item() == 8


def test_off_the_mount_it_warns_and_works_like_the_stock_writer(tmp_path):
    state = {"w": torch.arange(10, dtype=torch.float32)}
    ckpt = tmp_path / "step_1"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer = CkptfsWriter(ckpt)
        dcp.save(state, storage_writer=writer)
        back = {"w": torch.zeros(10)}
        dcp.load(back, storage_reader=CkptfsReader(ckpt))
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any("is not on a ckptfs mount" in m and "CkptfsWriter" in m for m in messages)
    assert any("is not on a ckptfs mount" in m and "CkptfsReader" in m for m in messages)
    assert writer.sync_files  # durable file by file, as the stock writer
    assert torch.equal(back["w"], state["w"])

    # DCP raises what a rank raised inside its CheckpointException.
    with pytest.raises(BaseException, match="not on a ckptfs mount"), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save(state, storage_writer=CkptfsWriter(tmp_path / "step_2", require_ckptfs=True))
    with pytest.raises(OSError, match="not on a ckptfs mount"):
        CkptfsReader(ckpt, require_ckptfs=True)


def test_checkpoint_calls_per_save(cluster, run_dir):
    """What the commit adds to a save, counted at the metadata service: one
    commit call per rank, one declaration and one look at the name on the
    coordinator, and no fsync (each file's size is committed once, at
    close)."""

    def rpcs():
        prefix = 'ckptfs_meta_rpcs_total{method="'
        return {k[len(prefix):].split('"')[0]: v for k, v in cluster.meta_metrics().items()
                if k.startswith(prefix)}

    before = rpcs()
    save_step(run_dir, 100, load=False, check_after=False)
    after = rpcs()
    calls = {name: after.get(name, 0) - before.get(name, 0) for name in after}
    files = os.listdir(os.path.join(run_dir, "step_100"))
    assert calls.get("CommitCheckpoint") == WORLD, calls
    assert calls.get("DeclareCheckpoint") == 1, calls
    assert calls.get("GetCheckpoint", 0) <= 1, calls
    assert calls.get("CommitWrite") == len(files), (calls, files)
