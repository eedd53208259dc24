"""Fixtures of the Python tests: one ckptfs cluster per test file
(`cluster`, started at the first test that asks for it, stopped after the
file's last one, also when tests fail; a file's CLUSTER_OPTIONS are passed
to Cluster()), and a fresh run directory on its mount per test
(`run_dir`)."""

import itertools
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cluster import Cluster  # noqa: E402

_run_ids = itertools.count()


@pytest.fixture(scope="module")
def cluster(request):
    """The test file's cluster: Cluster() with the file's CLUSTER_OPTIONS."""
    c = Cluster(metrics=True, **getattr(request.module, "CLUSTER_OPTIONS", {}))
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def run_dir(cluster, request):
    path = os.path.join(cluster.mount, "%s-%d" % (request.node.name.replace("/", "_")[:80],
                                                  next(_run_ids)))
    os.makedirs(path)
    return path
