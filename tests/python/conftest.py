"""Fixtures of the Python tests: one ckptfs cluster per test process
(`cluster`, started at the first test that asks for it, stopped after the
last one, also when tests fail), and a fresh run directory on its mount per
test (`run_dir`)."""

import itertools
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cluster import Cluster  # noqa: E402

_run_ids = itertools.count()


@pytest.fixture(scope="session")
def cluster():
    c = Cluster(metrics=True)
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
