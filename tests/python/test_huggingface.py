"""ckptfs.huggingface: with CkptfsCallback every checkpoint-N of a
two-process Trainer job (gloo, CPU) is committed by both processes before
on_save returns, resume_from_checkpoint=True finds the newest committed one
and never a torn one, save_total_limit gives the space back, and the
Trainer's own rotation (shutil.rmtree) works on committed checkpoints.
Jobs of hf_main.py on a real ckptfs mount."""

import errno
import os
import shutil
import types
import warnings

import pytest

import ckptfs
from ckptfs.huggingface import CkptfsCallback
from framework_support import wait_for_space_back
from ranks import require_all_ok, run_ranks

WORLD = 2
# One copy per chunk: the space checks compare the chunk bytes the storage
# servers hold with the sizes of the files the mount shows.
CLUSTER_OPTIONS = {"replicas": 1}


def train(run_dir, world=WORLD, **args):
    reports = require_all_ok(run_ranks(world, "train", script="hf_main.py", run=run_dir,
                                       timeout=240, **args))
    assert len({r["digest"] for r in reports}) == 1  # DDP kept the processes equal
    return reports


def names(run_dir, all=False):
    return [c["name"] for c in ckptfs.checkpoints(run_dir, all=all)]


def test_every_process_commits_and_resume_skips_a_torn_checkpoint(cluster, run_dir):
    first = train(run_dir, max_steps=6, save_steps=2, save_total_limit=2)
    for r in first:
        # Read by each process in on_save, right after the callback's.
        assert r["after_save"] == {"2": "committed", "4": "committed", "6": "committed"}, r
    assert names(run_dir, all=True) == ["checkpoint-4", "checkpoint-6"]
    newest = os.path.join(run_dir, "checkpoint-6")
    assert ckptfs.latest(run_dir) == newest
    info = ckptfs.info(newest)
    assert info["ranks"] == WORLD and info["arrived"] == WORLD
    files = os.listdir(newest)
    for name in ("model.safetensors", "optimizer.pt", "trainer_state.json",
                 "rng_state_0.pth", "rng_state_1.pth"):
        assert name in files, files
    stored, visible = wait_for_space_back(cluster)
    assert stored <= visible + (256 << 10), (stored, visible)

    # A job that died while saving checkpoint-8: pending, half written.
    torn = os.path.join(run_dir, "checkpoint-8")
    ckptfs.declare(torn, WORLD)
    with open(os.path.join(torn, "model.safetensors"), "wb") as f:
        f.write(b"\0" * 1000)
    assert "checkpoint-8" not in os.listdir(run_dir)

    second = train(run_dir, max_steps=10, save_steps=2, save_total_limit=2, resume=True)
    for r in second:
        assert r["first_step"] == 6, r  # from checkpoint-6, not the torn one
        assert r["first_digest"] == first[0]["digest"]
        assert r["after_save"] == {"8": "committed", "10": "committed"}, r
    assert sorted(names(run_dir, all=True)) == ["checkpoint-10", "checkpoint-8"]
    assert ckptfs.latest(run_dir) == os.path.join(run_dir, "checkpoint-10")
    assert os.path.getsize(os.path.join(torn, "model.safetensors")) > 1000  # saved anew
    stored, visible = wait_for_space_back(cluster)
    assert stored <= visible + (256 << 10), (stored, visible)


def test_save_strategy_best_leaves_no_unused_declaration(run_dir):
    # Evaluation at every step; the save happens only on a new best, so
    # the callback declares ahead of each evaluation and drops what no save
    # used. A falling then rising loss (large learning rate) gives both.
    report = train(run_dir, world=1, max_steps=6, save_strategy="best", eval_steps=1,
                   learning_rate=0.05)[0]
    saved = sorted(int(step) for step in report["after_save"])
    assert 1 in saved and len(saved) < 6, saved  # a first best, then evaluations with none
    assert all(s == "committed" for s in report["after_save"].values()), report
    listed = {c["name"]: c["state"] for c in ckptfs.checkpoints(run_dir, all=True)}
    assert set(listed.values()) == {"committed"}, listed
    assert sorted(listed) == sorted("checkpoint-%d" % s for s in saved)
    for step in range(1, 7):
        if step not in saved:
            assert not os.path.lexists(os.path.join(run_dir, "checkpoint-%d" % step))


def test_trainer_rotation_by_rmtree_frees_committed_checkpoints(cluster, run_dir):
    # What Trainer._save_checkpoint runs (before on_save) and what
    # save_total_limit=1 at the end of training does: shutil.rmtree with
    # ignore_errors=True, here on committed checkpoints.
    from transformers.trainer_utils import rotate_checkpoints
    for step in (1, 2, 3):
        path = os.path.join(run_dir, "checkpoint-%d" % step)
        ckptfs.declare(path, 1)
        with open(os.path.join(path, "model.safetensors"), "wb") as f:
            f.write(os.urandom(2 << 20))
        ckptfs.commit(path, 0)
    rotate_checkpoints(run_dir, save_total_limit=2)
    assert names(run_dir, all=True) == ["checkpoint-2", "checkpoint-3"]
    assert ckptfs.latest(run_dir) == os.path.join(run_dir, "checkpoint-3")
    # Removing the newest moves `latest` back to a committed one.
    shutil.rmtree(os.path.join(run_dir, "checkpoint-3"), ignore_errors=True)
    assert names(run_dir, all=True) == ["checkpoint-2"]
    assert ckptfs.latest(run_dir) == os.path.join(run_dir, "checkpoint-2")
    assert ckptfs.state(ckptfs.latest(run_dir)) == "committed"
    stored, visible = wait_for_space_back(cluster)
    assert stored <= visible + (256 << 10), (stored, visible)


def fake_args(output_dir, **overrides):
    args = dict(output_dir=output_dir, save_on_each_node=False, world_size=1,
                process_index=0, save_total_limit=None, save_strategy="steps")
    args.update(overrides)
    return types.SimpleNamespace(**args)


def fake_state(step=2):
    return types.SimpleNamespace(is_hyper_param_search=False, global_step=step,
                                 best_model_checkpoint=None)


def test_refusals_and_leftovers(run_dir, tmp_path):
    control = types.SimpleNamespace(should_save=True)
    with pytest.raises(ValueError, match="save_on_each_node"):
        CkptfsCallback().on_train_begin(
            fake_args(run_dir, save_on_each_node=True, world_size=2), fake_state(), control)
    search = types.SimpleNamespace(is_hyper_param_search=True)
    with pytest.raises(ValueError, match="hyperparameter search"):
        CkptfsCallback().on_train_begin(fake_args(run_dir), search, control)

    # A plain directory under the checkpoint's name is not adopted.
    os.mkdir(os.path.join(run_dir, "checkpoint-2"))
    callback = CkptfsCallback()
    callback.on_train_begin(fake_args(run_dir), fake_state(), control)
    with pytest.raises(FileExistsError, match="is not a ckptfs checkpoint"):
        callback.on_step_end(fake_args(run_dir), fake_state(2), control)

    # A save no event announced is declared and committed in on_save.
    path = os.path.join(run_dir, "checkpoint-3")
    os.mkdir(path)
    with open(os.path.join(path, "trainer_state.json"), "w") as f:
        f.write("{}")
    callback.on_save(fake_args(run_dir), fake_state(3), control)
    assert ckptfs.state(path) == "committed"

    # Off the mount: a warning, then nothing; or an error if required.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        off = CkptfsCallback()
        off.on_train_begin(fake_args(str(tmp_path)), fake_state(), control)
        off.on_step_end(fake_args(str(tmp_path)), fake_state(), control)
        off.on_save(fake_args(str(tmp_path)), fake_state(), control)
    assert any("not on a ckptfs mount" in str(w.message) for w in caught)
    assert os.listdir(tmp_path) == []
    with pytest.raises(OSError) as e:
        CkptfsCallback(require_ckptfs=True).on_train_begin(
            fake_args(str(tmp_path)), fake_state(), control)
    assert e.value.errno == errno.ENOTSUP
