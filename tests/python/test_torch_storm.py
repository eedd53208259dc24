"""bench/torch_storm.py with --dcp-writer ckptfs on a real mount:
every phase runs against the mount and a plain directory, each DCP save on
the mount is a committed checkpoint that the storm removes afterwards, the
plain directory runs the writer's stock fallback, and a checkpoint the
storm did not make is left alone."""

import json
import os
import subprocess
import sys

import ckptfs

HERE = os.path.dirname(os.path.abspath(__file__))
STORM = os.path.join(HERE, "..", "..", "bench", "torch_storm.py")
RANKS = 2
REPEAT = 2


def run_storm(*args, timeout=240):
    return subprocess.run([sys.executable, STORM, "--ranks", str(RANKS), "--size", "4M",
                           "--tensors", "3", "--device", "cpu", "--phase-timeout", "120", *args],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)


def test_ckptfs_writer_commits_every_dcp_save_and_removes_it(cluster, run_dir, tmp_path):
    storm, plain = os.path.join(run_dir, "storm"), str(tmp_path / "plain")
    report = str(tmp_path / "storm.json")
    result = run_storm("--dir", storm, "--baseline", plain, "--repeat", str(REPEAT),
                       "--dcp-writer", "ckptfs", "--json", report)
    assert result.returncode == 0, result.stdout + cluster.describe_logs()
    assert "B: not on a ckptfs mount: DCP falls back to the stock writer" in result.stdout
    with open(report) as f:
        d = json.load(f)

    # Every phase ran on both targets (a load that read back different
    # tensors fails the run), and the daemons' CPU is the mount's only.
    rows = {r["phase"]: r for r in d["summary"]}
    assert sorted(rows) == ["dcp_load", "dcp_save", "load", "save"]
    for phase, row in rows.items():
        assert row["A"]["gbps"] > 0 and row["B"]["gbps"] > 0, phase
        assert row["ratio"] is not None, phase
        assert "daemon_cpu_s_per_gib" in row["A"], phase
        assert "daemon_cpu_s_per_gib" not in row["B"], phase
    for record in d["records"]:
        assert len(record["repeats"]) == REPEAT, record

    assert d["dcp_writer"] == "ckptfs"
    assert d["dcp_writers"] == {"A": "ckptfs", "B": "stock (fallback)"}
    assert d["dcp_thread_count"] == 1

    # One committed checkpoint per repeat on the mount, each removed.
    assert [(c["target"], c["repeat"]) for c in d["checkpoints"]] == [
        ("A", r + 1) for r in range(REPEAT)]
    for c in d["checkpoints"]:
        assert c["state"] == "committed", c
        assert c["ranks"] == RANKS and c["arrived"] == RANKS, c
        assert c["files"] >= RANKS + 1 and c["bytes"] > 0, c  # + .metadata
        assert os.path.dirname(c["path"]) == storm, c
        assert c["removed"] is True, c
        assert not os.path.exists(c["path"]), c
    assert ckptfs.checkpoints(storm, all=True) == []
    assert ckptfs.latest(storm) is None
    assert os.listdir(storm) == []
    assert os.listdir(plain) == []


def test_a_checkpoint_the_storm_did_not_make_is_left_alone(cluster, run_dir):
    storm = os.path.join(run_dir, "storm")
    earlier = os.path.join(storm, "dcp_0")
    ckptfs.declare(earlier, 1)
    with open(os.path.join(earlier, "rank_0"), "wb") as f:
        f.write(b"x" * 4096)
    ckptfs.commit(earlier, 0)

    result = run_storm("--dir", storm, "--repeat", "1", "--phases", "dcp_save,dcp_load",
                       "--dcp-writer", "ckptfs")
    assert result.returncode == 1, result.stdout
    assert "%s exists already" % earlier in result.stdout
    assert ckptfs.state(earlier) == "committed"
    assert ckptfs.latest(storm) == earlier
    ckptfs.remove(earlier)
