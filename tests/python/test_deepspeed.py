"""ckptfs.deepspeed: engine.save_checkpoint through CkptfsCheckpointEngine
commits every tag on both ranks before it returns, keep=K gives the space
of older tags back, a rank whose write fails leaves no committed tag, and
DeepSpeed's own `latest` file lives beside ckptfs's pointer symlink once
the run directory names that symlink otherwise (ckptfs.set_latest_name).
Two-rank DeepSpeed jobs on CPU (ZeRO stage 1, gloo) of ds_main.py on a real
ckptfs mount.

The tests of the pointer's name need a ckptfs whose metadata service
stores user.ckptfs.latest_name; an older one refuses the attribute
(EINVAL), and those tests fail saying so."""

import os

import pytest

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import ckptfs  # noqa: E402
import ckptfs.deepspeed  # noqa: E402
from framework_support import wait_for_space_back  # noqa: E402
from ranks import require_all_ok, run_ranks  # noqa: E402

WORLD = 2
# One copy per chunk: the space checks compare the chunk bytes the storage
# servers hold with the sizes of the files the mount shows.
CLUSTER_OPTIONS = {"replicas": 1}


def save(run_dir, **args):
    reports = require_all_ok(run_ranks(WORLD, "save", script="ds_main.py", run=run_dir,
                                       timeout=240, **args))
    assert reports[0]["digest"] == reports[1]["digest"]
    return reports


def names(run_dir, all=False):
    return [c["name"] for c in ckptfs.checkpoints(run_dir, all=all)]


def test_every_tag_commits_and_keep_gives_space_back(cluster, run_dir):
    reports = save(run_dir, saves=3, every=2, save_latest=False, keep=2)
    for r in reports:
        assert {t: a["state"] for t, a in r["after_save"].items()} == {
            "step2": "committed", "step4": "committed", "step6": "committed"}, r
        # Loaded into a fresh engine from ckptfs's newest committed tag.
        assert r["loaded_tag"] == "step6" and r["loaded_step"] == 6, r
        assert r["loaded_digest"] == r["digest"]
    assert names(run_dir, all=True) == ["step4", "step6"]
    info = ckptfs.info(os.path.join(run_dir, "step6"))
    assert info["ranks"] == WORLD and info["arrived"] == WORLD
    assert sorted(os.listdir(os.path.join(run_dir, "step6"))) == [
        "mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt",
        "zero_pp_rank_1_mp_rank_00_optim_states.pt"]
    assert ckptfs.deepspeed.latest_tag(run_dir) == "step6"
    stored, visible = wait_for_space_back(cluster)
    assert stored <= visible + (256 << 10), (stored, visible)


def test_failing_rank_leaves_no_committed_tag(run_dir):
    results = run_ranks(WORLD, "failing_rank", script="ds_main.py", run=run_dir,
                        failing_rank=1, timeout=240)
    for r in results:
        assert r.returncode == 0 and r.report is not None, r
        assert r.report["raised"], r
    assert "simulated: no space left" in results[1].report["error"]
    # The failing rank removed the pending tag, so rank 0 failed at once.
    assert not os.path.exists(os.path.join(run_dir, "bad"))
    assert names(run_dir, all=True) == ["good"]
    assert ckptfs.deepspeed.latest_tag(run_dir) == "good"


def test_set_latest_name_renames_the_pointer(run_dir):
    ckptfs.set_latest_name(run_dir, "committed")
    assert ckptfs.latest_name(run_dir) == "committed"
    step = os.path.join(run_dir, "step1")
    ckptfs.declare(step, 1)
    ckptfs.commit(step, 0)
    assert os.readlink(os.path.join(run_dir, "committed")) == "step1"
    assert not os.path.lexists(os.path.join(run_dir, "latest"))
    with open(os.path.join(run_dir, "latest"), "w") as f:  # a file of the framework's
        f.write("step1")
    ckptfs.set_latest_name(run_dir, "")
    step2 = os.path.join(run_dir, "step2")
    ckptfs.declare(step2, 1)
    ckptfs.commit(step2, 0)
    assert ckptfs.latest(run_dir) == step2  # answered without a symlink
    assert not os.path.lexists(os.path.join(run_dir, "committed"))
    with open(os.path.join(run_dir, "latest")) as f:
        assert f.read() == "step1"


def test_deepspeed_latest_file_beside_the_ckptfs_pointer(run_dir):
    reports = save(run_dir, saves=3, every=2, save_latest=True, keep=2)
    for r in reports:
        for tag, after in r["after_save"].items():
            assert after == {"state": "committed", "ds_latest": tag}, r
        # Loaded from DeepSpeed's `latest` file.
        assert r["loaded_tag"] == "step6" and r["loaded_digest"] == r["digest"], r
    latest_file = os.path.join(run_dir, "latest")
    assert os.path.isfile(latest_file) and not os.path.islink(latest_file)
    pointer = os.path.join(run_dir, ckptfs.deepspeed.DEFAULT_LATEST_NAME)
    assert os.readlink(pointer) == "step6"
    assert ckptfs.latest(run_dir) == os.path.join(run_dir, "step6")


def test_engine_arguments_are_checked():
    with pytest.raises(ValueError, match="keep at least 2"):
        ckptfs.deepspeed.CkptfsCheckpointEngine(keep=1)
    with pytest.raises(ValueError, match="name of DeepSpeed's own file"):
        ckptfs.deepspeed.CkptfsCheckpointEngine(latest_name="latest")
    with pytest.raises(ValueError, match="has no checkpoint_engine"):
        ckptfs.deepspeed.install(object())
