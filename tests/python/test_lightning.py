"""ckptfs.lightning: Lightning's ModelCheckpoint saves through
CkptfsCheckpointIO as committed checkpoints, resumes from ckpt_path="last",
save_top_k retention gives the space back, and AsyncCheckpointIO around it
leaves no checkpoint behind that retention dropped. Two-rank DDP jobs
(gloo, CPU) of lightning_main.py on a real ckptfs mount."""

import errno
import os
import warnings

import pytest
import torch

import ckptfs
from ckptfs.lightning import CHECKPOINT_FILE, CkptfsCheckpointIO, checkpoint_file
from framework_support import wait_for_space_back
from ranks import require_all_ok, run_ranks

WORLD = 2
# One copy per chunk: the space checks compare the chunk bytes the storage
# servers hold with the sizes of the files the mount shows.
CLUSTER_OPTIONS = {"replicas": 1}


def fit(run_dir, **args):
    reports = require_all_ok(run_ranks(WORLD, "fit", script="lightning_main.py", run=run_dir,
                                       timeout=240, **args))
    assert reports[0]["digest"] == reports[1]["digest"]  # DDP kept the ranks equal
    return reports[0]


def names(run_dir, all=False):
    return [c["name"] for c in ckptfs.checkpoints(run_dir, all=all)]


def test_top_k_and_last_are_committed_and_resume_from_last(cluster, run_dir):
    first = fit(run_dir, max_epochs=3, top_k=2)
    assert first["global_step"] == 12
    assert first["best_k_models"] == ["epoch=1-step=8.ckpt", "epoch=2-step=12.ckpt"]
    # Each Lightning checkpoint is a committed one-rank checkpoint directory
    # holding the file; the oldest top-k one was removed by retention.
    assert sorted(names(run_dir, all=True)) == [
        "epoch=1-step=8.ckpt", "epoch=2-step=12.ckpt", "last.ckpt"]
    last = os.path.join(run_dir, "last.ckpt")
    assert ckptfs.latest(run_dir) == last
    assert ckptfs.info(last)["ranks"] == 1
    assert os.listdir(last) == [CHECKPOINT_FILE]
    saved = torch.load(checkpoint_file(last), weights_only=False)
    assert saved["global_step"] == 12

    second = fit(run_dir, max_epochs=5, top_k=2, ckpt_path="last")
    assert second["start"]["global_step"] == 12, second["start"]
    assert second["start"]["digest"] == first["digest"]  # the weights it saved
    assert second["global_step"] == 20
    assert sorted(names(run_dir)) == ["epoch=3-step=16.ckpt", "epoch=4-step=20.ckpt",
                                      "last.ckpt"]
    assert ckptfs.latest(run_dir) == last
    # The run directory loads as its latest; a top-k path as itself.
    io = CkptfsCheckpointIO()
    assert io.load_checkpoint(run_dir)["global_step"] == 20
    assert io.load_checkpoint(os.path.join(run_dir, "epoch=3-step=16.ckpt"))["global_step"] == 16

    # Retention gave back the space of what it removed (last.ckpt replaced
    # at every epoch, epochs 0-2 dropped from the top 2).
    stored, visible = wait_for_space_back(cluster)
    assert stored <= visible + (256 << 10), (stored, visible)

    # Resuming from a named checkpoint that is not the newest: the run saves
    # epoch 4 again, replacing the committed one of the abandoned timeline.
    third = fit(run_dir, max_epochs=6, top_k=2,
                ckpt_path=os.path.join(run_dir, "epoch=3-step=16.ckpt"))
    assert third["start"]["global_step"] == 16, third["start"]
    assert third["global_step"] == 24
    assert io.load_checkpoint(os.path.join(run_dir, "epoch=5-step=24.ckpt"))["global_step"] == 24
    assert ckptfs.latest(run_dir) == last
    assert {c["state"] for c in ckptfs.checkpoints(run_dir, all=True)} == {"committed"}


def test_async_checkpoint_io_removes_what_retention_dropped(cluster, run_dir):
    # A save at every step: ModelCheckpoint asks to remove the previous
    # top-1 checkpoint right after queueing the save of the next, before the
    # queued one of the previous step has run when saves are slower than
    # steps, as they are here (each held back 0.2 s).
    report = fit(run_dir, max_epochs=2, top_k=1, every_n_train_steps=1, save_delay_s=0.2,
                 **{"async": True})
    assert report["global_step"] == 8
    assert report["deferred_left"] == []
    assert report["early_removals"] > 0  # the race this test is about happened
    assert sorted(names(run_dir, all=True)) == ["epoch=1-step=8.ckpt", "last.ckpt"]
    assert ckptfs.latest(run_dir) in {os.path.join(run_dir, n)
                                      for n in ("epoch=1-step=8.ckpt", "last.ckpt")}
    assert sorted(os.listdir(run_dir)) == ["epoch=1-step=8.ckpt", "last.ckpt", "latest"]
    stored, visible = wait_for_space_back(cluster)
    assert stored <= visible + (256 << 10), (stored, visible)


def test_failed_save_leaves_no_checkpoint_and_latest_stays(run_dir):
    io = CkptfsCheckpointIO()
    good = os.path.join(run_dir, "good.ckpt")
    io.save_checkpoint({"global_step": 1}, good)
    assert ckptfs.state(good) == "committed"

    bad = os.path.join(run_dir, "bad.ckpt")
    with pytest.raises(Exception, match="pickle"):
        io.save_checkpoint({"global_step": 2, "hook": lambda: None}, bad)
    assert not os.path.exists(bad)
    assert ckptfs.latest(run_dir) == good
    assert names(run_dir, all=True) == ["good.ckpt"]

    # A committed checkpoint saved again under its name is replaced.
    io.save_checkpoint({"global_step": 3}, good)
    assert io.load_checkpoint(good)["global_step"] == 3

    # What is not a ckptfs checkpoint is neither overwritten nor removed.
    plain = os.path.join(run_dir, "plain.ckpt")
    with open(plain, "wb") as f:
        f.write(b"saved some other way")
    with pytest.raises(FileExistsError, match="is not a ckptfs checkpoint"):
        io.save_checkpoint({"global_step": 4}, plain)
    os.mkdir(os.path.join(run_dir, "somedir.ckpt"))
    with pytest.raises(IsADirectoryError, match="no ckptfs checkpoint"):
        io.remove_checkpoint(os.path.join(run_dir, "somedir.ckpt"))
    with pytest.raises(TypeError, match="storage_options"):
        io.save_checkpoint({}, os.path.join(run_dir, "x.ckpt"), storage_options={"a": 1})


def test_loading_a_pending_checkpoint_is_refused(run_dir):
    pending = os.path.join(run_dir, "epoch=9-step=90.ckpt")
    ckptfs.declare(pending, 1)
    torch.save({"global_step": 90}, os.path.join(pending, CHECKPOINT_FILE))
    with pytest.raises(OSError, match="pending checkpoint"):
        CkptfsCheckpointIO().load_checkpoint(pending)
    with pytest.raises(FileNotFoundError):
        checkpoint_file(os.path.join(run_dir, "missing.ckpt"))
    # A later save under that name clears the leftover.
    CkptfsCheckpointIO().save_checkpoint({"global_step": 91}, pending)
    assert ckptfs.state(pending) == "committed"


def test_off_the_mount_it_saves_plain_files(tmp_path):
    io = CkptfsCheckpointIO()
    path = tmp_path / "run" / "epoch=0-step=1.ckpt"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        io.save_checkpoint({"global_step": 1}, path)
    assert any("not on a ckptfs mount" in str(w.message) for w in caught)
    assert path.is_file() and io.load_checkpoint(path)["global_step"] == 1
    io.remove_checkpoint(path)
    assert not path.exists()
    with pytest.raises(OSError) as e:
        CkptfsCheckpointIO(require_ckptfs=True).save_checkpoint({}, path)
    assert e.value.errno == errno.ENOTSUP
