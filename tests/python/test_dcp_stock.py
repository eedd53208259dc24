"""torch.distributed.checkpoint, unchanged, through a ckptfs mount: 4 rank
processes (gloo) dcp.save and dcp.load a state dict (tensors of mixed
dtypes and shapes, a DTensor sharded over the ranks, Python values) with
the stock FileSystemWriter and FileSystemReader, and every tensor loads
back bit-exact: about 370 MiB with the writer's defaults (one thread, one
file per rank), and in every other file layout and with dcp.async_save a
state whose files still span several chunks. Two copies of every chunk, as
`ckptfs up` keeps by default."""

import os

import pytest

from ranks import require_all_ok, run_ranks

WORLD = 4
MIB_PER_RANK = 96  # with the writer's defaults: > 300 MiB in all
SMALL_MIB_PER_RANK = 16  # the other layouts: files of a few 4 MiB chunks
ASYNC_MIB_PER_RANK = 24  # long enough a save for training steps beside it
CLUSTER_OPTIONS = {"replicas": 2}  # what `ckptfs up` gives users


@pytest.mark.parametrize("thread_count", [1, 4])
@pytest.mark.parametrize("single_file_per_rank", [True, False])
def test_save_then_load_is_bit_exact(run_dir, thread_count, single_file_per_rank):
    defaults = thread_count == 1 and single_file_per_rank
    ckpt = os.path.join(run_dir, "step_1000")
    reports = require_all_ok(run_ranks(
        WORLD, "stock", dir=ckpt, thread_count=thread_count,
        single_file_per_rank=single_file_per_rank, mode="sync",
        mib=MIB_PER_RANK if defaults else SMALL_MIB_PER_RANK))
    for rank, report in enumerate(reports):
        assert report["differences"] == [], "rank %d" % rank
    if defaults:
        assert sum(r["bytes"] for r in reports) > 300 << 20
    names = os.listdir(ckpt)
    assert ".metadata" in names
    data_files = [n for n in names if n.endswith(".distcp")]
    if single_file_per_rank:
        assert len(data_files) == WORLD * thread_count
    else:
        assert len(data_files) > WORLD * thread_count


def test_async_save_then_load_is_bit_exact(run_dir):
    ckpt = os.path.join(run_dir, "step_2000")
    reports = require_all_ok(run_ranks(
        WORLD, "stock", dir=ckpt, thread_count=2, single_file_per_rank=True,
        mode="async", mib=ASYNC_MIB_PER_RANK))
    for rank, report in enumerate(reports):
        assert report["differences"] == [], "rank %d" % rank
        assert report["steps_while_saving"] > 0, "rank %d: training did not go on" % rank
