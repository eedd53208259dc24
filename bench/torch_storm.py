#!/usr/bin/env python3
"""torch_storm: real torch.save / torch.load / torch.distributed.checkpoint
storms from GPU (or CPU) memory into a directory, against a baseline.

ckptfs-bench reproduces torch.save's bytes and write pattern without torch;
this script runs torch itself, as a training job does: N rank processes
each hold a state dict of bf16 tensors on the GPU (CUDA when present, else
CPU), wait at a barrier, and then

  save      torch.save(state, DIR/step_R/rank_NNNNN.pt)   (no fsync, as torch)
  load      torch.load of the rank's own file onto the device (caches dropped
            first when root), compared with what was saved
  dcp_save  torch.distributed.checkpoint.save of all ranks' states into
            DIR/dcp_R (a gloo process group; rank 0 writes .metadata) with
            the writer --dcp-writer names:
              stock   FileSystemWriter as DCP users get it (sync_files=True:
                      an fsync per file, unlike torch.save)
              nosync  FileSystemWriter(sync_files=False): no fsync
              ckptfs  ckptfs.dcp.CkptfsWriter: dcp.save commits DIR/dcp_R as
                      a checkpoint (no fsync; the commit syncs every storage
                      server once). Off a ckptfs mount (the baseline) it
                      falls back to the stock writer's fsync per file.
  dcp_load  torch.distributed.checkpoint.load of it into the states, with
            FileSystemReader (CkptfsReader for --dcp-writer ckptfs, which
            loads committed checkpoints only), compared with what was saved

Repeats alternate A B A B. For each phase and target it prints the median
aggregate GB/s (bytes / (last rank end - first rank start)), the median of
the per-repeat ratios A/B, the ranks' CPU seconds per GiB and, on a ckptfs
mount, the CPU seconds per GiB of the ckptfs daemons serving it (the
ckptfs-fuse of the mount and the ckptfs-meta and ckptfs-storage of its
metadata address; every ckptfs daemon on this machine where those are not
found). Phases whose torch module does not import (DCP on Debian's torch
1.13) are skipped with a note.

Step directories are removed after each repeat: committed checkpoints are
immutable, so those with ckptfs.remove (`ckptfs ckpt rm`). The JSON
report lists every checkpoint the ckptfs writer made, its state after the
save and whether it was removed. --dcp-writer ckptfs needs the ckptfs
package: installed (the build's venv has it), else taken from python/ in
this repository.

Usage:
  torch_storm.py --dir /checkpoints/storm --baseline /var/tmp/plain/storm \\
      --ranks 8 --size 1G --repeat 3 [--phases save,load,dcp_save,dcp_load]
      [--dcp-writer stock|nosync|ckptfs] [--dcp-thread-count N]
      [--device auto|cuda|cpu] [--phase-timeout S] [--json out.json]
Exit status: 0 success, 1 a phase failed or read back wrong bytes, 2 usage.
"""

import argparse
import json
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import os
import re
import resource
import shutil
import signal
import statistics
import sys
import tempfile
import time
import traceback
import warnings

from storm_host import daemon_cpu_seconds, drop_caches, fs_type, serving_daemons

PHASES = ("save", "load", "dcp_save", "dcp_load")
GIB = float(1 << 30)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DCP_WRITERS = {
    "stock": "FileSystemWriter, sync_files=True (DCP's default): an fsync per file",
    "nosync": "FileSystemWriter, sync_files=False: no fsync",
    "ckptfs": "ckptfs.dcp.CkptfsWriter: commits each save as a checkpoint, "
              "no fsync, one sync per storage server",
}
FALLBACK = "stock (fallback)"  # what --dcp-writer ckptfs runs off a ckptfs mount


def parse_size(text):
    m = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]?)(i?B)?\s*", text, re.IGNORECASE)
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (like 512M, 2G)")
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    return int(float(m.group(1)) * scale[m.group(2).upper()])


def import_ckptfs():
    """The ckptfs package: the installed one (the build's venv has it),
    else python/ of this repository. Rank processes inherit sys.path."""
    try:
        import ckptfs
    except ImportError:
        sys.path.insert(0, os.path.join(REPO, "python"))
        import ckptfs
    return ckptfs


def make_state(torch, rank, size, tensors, device):
    """`tensors` bf16 tensors of about size/tensors bytes each, seeded by rank."""
    gen = torch.Generator(device="cpu").manual_seed(1000 + rank)
    per = max(1, size // tensors // 2)  # bf16: 2 bytes per element
    state = {}
    for i in range(tensors):
        t = torch.randn(per, generator=gen, dtype=torch.float32).to(torch.bfloat16)
        # Names unique per rank: DCP would take equal names on every rank for
        # one replicated tensor and save it once.
        state[f"rank{rank}.layer{i}.weight"] = t.to(device)
    return state


def state_bytes(state):
    return sum(t.numel() * t.element_size() for t in state.values())


def dcp_storage(args, dcp):
    """(writer of a path, reader of a path) for --dcp-writer. Only
    arguments given are passed: stock is what DCP users get."""
    writer_args = {}
    if args.dcp_thread_count is not None:
        writer_args["thread_count"] = args.dcp_thread_count
    if args.dcp_file_per_tensor:
        writer_args["single_file_per_rank"] = False
    if args.dcp_writer == "ckptfs":
        from ckptfs.dcp import CkptfsReader, CkptfsWriter
        # Off a ckptfs mount both warn, every rank; the parent says it once.
        warnings.filterwarnings("ignore", message=".*is not on a ckptfs mount",
                                category=RuntimeWarning)
        return (lambda path: CkptfsWriter(path, **writer_args), CkptfsReader)
    if args.dcp_writer == "nosync":
        writer_args["sync_files"] = False
    return (lambda path: dcp.FileSystemWriter(path, **writer_args), dcp.FileSystemReader)


def rank_main(rank, args, barrier, conn):
    """One rank: holds its state and runs the phases the parent sends. Every
    failure is sent back as ("error", traceback), and breaks the barrier so
    that no other rank waits for this one."""
    def fail():
        barrier.abort()
        conn.send(("error", traceback.format_exc()))

    # DCP raises CheckpointException, a BaseException, on every rank when
    # one rank's step fails.
    failures = (Exception,)
    try:
        import torch
        device = args.device
        if device == "cuda":
            torch.cuda.set_device(rank % torch.cuda.device_count())
        state = make_state(torch, rank, args.size, args.tensors, device)
        dist = dcp_save = dcp_load = None
        if any(p.startswith("dcp_") for p in args.phases):
            import torch.distributed as dist
            import torch.distributed.checkpoint as dcp
            failures += tuple(e for e in [getattr(dcp, "CheckpointException", None)] if e)
            # dcp.save/load from torch 2.2; save_state_dict/load_state_dict before.
            dcp_save = getattr(dcp, "save", None) or dcp.save_state_dict
            dcp_load = getattr(dcp, "load", None) or dcp.load_state_dict
            dcp_writer, dcp_reader = dcp_storage(args, dcp)
    except Exception:
        fail()
        return
    pg_ready = False
    while True:
        msg = conn.recv()
        if msg is None:
            break
        phase, path = msg
        try:
            if phase.startswith("dcp_") and not pg_ready:
                dist.init_process_group("gloo", init_method=f"file://{args.pg_file}",
                                        rank=rank, world_size=args.ranks)
                pg_ready = True
            if device == "cuda":
                torch.cuda.synchronize()
            barrier.wait()
            cpu0 = resource.getrusage(resource.RUSAGE_SELF)
            start = time.monotonic()
            if phase == "save":
                torch.save(state, path)
            elif phase == "load":
                loaded = torch.load(path, map_location=device)
            elif phase == "dcp_save":
                dcp_save(state, storage_writer=dcp_writer(path))
            elif phase == "dcp_load":
                loaded = {k: torch.empty_like(v) for k, v in state.items()}
                dcp_load(loaded, storage_reader=dcp_reader(path))
            if device == "cuda":
                torch.cuda.synchronize()
            end = time.monotonic()
            cpu1 = resource.getrusage(resource.RUSAGE_SELF)
            if phase in ("load", "dcp_load"):
                bad = [k for k, v in state.items() if k not in loaded or not torch.equal(v, loaded[k])]
                if bad or len(loaded) != len(state):
                    raise RuntimeError(f"{phase} of {path} read back different tensors: {bad[:3]}")
                del loaded
            cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
            conn.send(("ok", start, end, state_bytes(state), cpu))
        except failures:
            fail()
    if pg_ready:
        dist.destroy_process_group()


class Ranks:
    """The rank processes, started once and reused by every phase."""

    def __init__(self, args):
        ctx = mp.get_context("spawn")  # CUDA does not survive fork
        self.barrier = ctx.Barrier(args.ranks)
        self.timeout = args.phase_timeout or None
        self.conns, self.procs = [], []
        for rank in range(args.ranks):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=rank_main, args=(rank, args, self.barrier, child), daemon=True)
            p.start()
            child.close()  # so that a rank that dies reads as EOF here
            self.conns.append(parent)
            self.procs.append(p)

    def run(self, phase, path_of_rank):
        """Every rank's reply to `phase`. Raises RuntimeError naming the first
        rank that failed (not merely at the broken barrier), died, or was still
        busy after --phase-timeout."""
        for rank, conn in enumerate(self.conns):
            try:
                conn.send((phase, path_of_rank(rank)))
            except OSError:
                pass  # a dead rank: its reply or its exit below says why
        replies = {}
        waiting = {conn: rank for rank, conn in enumerate(self.conns)}
        exits = {p.sentinel: rank for rank, p in enumerate(self.procs)}
        deadline = time.monotonic() + self.timeout if self.timeout else None
        while waiting:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = mp_connection.wait(list(waiting) + list(exits), timeout=left)
            if not ready:
                self.barrier.abort()
                busy = sorted(waiting.values())
                raise RuntimeError(f"ranks {busy} still busy after --phase-timeout "
                                   f"{self.timeout:g} s")
            for r in ready:
                if r in waiting:
                    rank = waiting.pop(r)
                    try:
                        replies[rank] = r.recv()
                    except EOFError:
                        replies[rank] = ("error", self.death(rank))
                elif r in exits:
                    rank = exits.pop(r)
                    conn = self.conns[rank]
                    if conn in waiting and not conn.poll():
                        del waiting[conn]
                        self.barrier.abort()
                        replies[rank] = ("error", self.death(rank))
        errors = [(rank, replies[rank][1]) for rank in sorted(replies) if replies[rank][0] != "ok"]
        errors.sort(key=lambda e: "BrokenBarrierError" in e[1])
        if errors:
            raise RuntimeError(f"rank {errors[0][0]}: {errors[0][1]}")
        return [replies[rank] for rank in range(len(self.conns))]

    def death(self, rank):
        """How rank `rank`'s process ended, for a rank that did not reply."""
        p = self.procs[rank]
        p.join(timeout=5)
        code = p.exitcode
        how = ("is still running" if code is None else
               f"was killed by signal {-code}" if code < 0 else f"exited with code {code}")
        return f"its process {how} without replying"

    def close(self):
        """Ends every rank within a few seconds, killing those that hang."""
        self.barrier.abort()
        for conn in self.conns:
            try:
                conn.send(None)
            except OSError:
                pass
        deadline = time.monotonic() + 10
        for p in self.procs:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
        for p in self.procs:
            if p.is_alive():
                p.kill()
                p.join()


def dcp_writer_on(writer, root):
    """What --dcp-writer `writer` runs on target directory `root`."""
    if writer == "ckptfs" and fs_type(root) != "fuse.ckptfs":
        return FALLBACK
    return writer


def dcp_default_thread_count():
    """FileSystemWriter's default thread_count, or None if it has none."""
    import inspect
    from torch.distributed.checkpoint import FileSystemWriter
    param = inspect.signature(FileSystemWriter.__init__).parameters.get("thread_count")
    return None if param is None else param.default


def phase_paths(root, phase, step):
    """The step directory a phase writes or reads, and each rank's path."""
    if phase in ("save", "load"):
        d = os.path.join(root, f"step_{step}")
        return d, lambda rank: os.path.join(d, f"rank_{rank:05d}.pt")
    d = os.path.join(root, f"dcp_{step}")
    return d, lambda rank: d


def remove_step(d, ckptfs):
    """Removes step directory `d`: a checkpoint with ckptfs.remove
    (committed ones are immutable), anything else with rmtree. True when
    `d` is gone."""
    if ckptfs is not None and os.path.isdir(d) and ckptfs.on_ckptfs(d):
        try:
            if ckptfs.state(d) is not None:
                ckptfs.remove(d)
        except OSError as e:
            print(f"torch_storm: cannot remove checkpoint {d}: {e}", file=sys.stderr)
    shutil.rmtree(d, ignore_errors=True)
    return not os.path.exists(d)


def check_checkpoint(ckptfs, d, label, repeat, ranks):
    """The record of checkpoint `d` that dcp_save with CkptfsWriter made;
    raises unless it is committed by every rank."""
    info = ckptfs.info(d) or {}
    entry = {"target": label, "repeat": repeat + 1, "path": d, "state": info.get("state")}
    for key in ("ranks", "arrived", "files", "bytes"):
        entry[key] = info.get(key)
    if entry["state"] != "committed" or entry["arrived"] != ranks:
        raise RuntimeError(f"dcp_save on {label}, repeat {repeat + 1}: {d} is "
                           f"{entry['state'] or 'no checkpoint'} ({entry['arrived']} of "
                           f"{entry['ranks']} ranks arrived) after dcp.save returned")
    return entry


def run_storm(args, targets, ranks, notes, made, checkpoints, ckptfs):
    """records[(phase, label)] = list over repeats of figure dicts. Every
    step directory it creates is added to `made` and removed when its
    repeat ends on that target; the caller removes what a failure left.
    With --dcp-writer ckptfs, `ckptfs` is the ckptfs package, and each
    checkpoint CkptfsWriter commits is checked and appended to
    `checkpoints`, with "removed" set once it is gone."""
    records = {}
    daemons = {label: serving_daemons(root) for label, root in targets}
    for label, root in targets:
        if fs_type(root) == "fuse.ckptfs" and daemons[label] is None:
            notes["daemons"] = (f"daemon CPU of {label}: every ckptfs daemon on this machine "
                                "(the ones serving its mount were not found)")
    for repeat in range(args.repeat):
        for label, root in targets:
            on_ckptfs = fs_type(root) == "fuse.ckptfs"
            commits = args.dcp_writer == "ckptfs" and on_ckptfs
            committed = {}
            steps = {}
            for phase in args.phases:
                saves = "save" if phase == "load" else "dcp_save" if phase == "dcp_load" else phase
                d, path_of_rank = phase_paths(root, saves, repeat)
                if phase in ("save", "dcp_save"):
                    if phase == "dcp_save" and commits and os.path.lexists(d):
                        # It may be a committed checkpoint: not ours to remove.
                        raise RuntimeError(
                            f"{d} exists already (an earlier run's?); remove it (`ckptfs ckpt "
                            f"rm {d}` if it is a checkpoint) or choose another --dir")
                    os.makedirs(d, exist_ok=True)
                    made.add(d)
                    steps[phase] = d
                elif saves not in steps:
                    raise RuntimeError(f"{phase} needs {saves} in --phases")
                if not drop_caches() and "caches" not in notes:
                    notes["caches"] = "page cache not dropped before phases (needs root)"
                cpu0 = daemon_cpu_seconds(daemons[label])
                try:
                    replies = ranks.run(phase, path_of_rank)
                except RuntimeError as e:
                    raise RuntimeError(f"{phase} on {label} ({root}), repeat {repeat + 1}, {e}")
                daemon_cpu = daemon_cpu_seconds(daemons[label]) - cpu0
                start = min(r[1] for r in replies)
                end = max(r[2] for r in replies)
                nbytes = sum(r[3] for r in replies)
                fig = {"gbps": nbytes / (end - start) / 1e9, "wall_s": end - start,
                       "bytes": nbytes, "rank_cpu_s_per_gib": sum(r[4] for r in replies) / (nbytes / GIB)}
                if on_ckptfs:
                    fig["daemon_cpu_s_per_gib"] = daemon_cpu / (nbytes / GIB)
                records.setdefault((phase, label), []).append(fig)
                print(f"  repeat {repeat + 1} {label} {phase:8s} {fig['gbps']:7.3f} GB/s", flush=True)
                if phase == "dcp_save" and commits:
                    entry = check_checkpoint(ckptfs, d, label, repeat, args.ranks)
                    checkpoints.append(entry)
                    committed[d] = entry
            for d in steps.values():
                gone = remove_step(d, ckptfs)
                if d in committed:
                    committed[d]["removed"] = gone
                if not gone:
                    raise RuntimeError(f"cannot remove {d} after repeat {repeat + 1} on {label}")
                made.discard(d)
    return records


def summarize(args, records, labels):
    rows = []
    for phase in args.phases:
        row = {"phase": phase}
        for label in labels:
            figs = records.get((phase, label), [])
            row[label] = {k: statistics.median(f[k] for f in figs)
                          for k in figs[0]} if figs else {}
        if len(labels) == 2:
            a, b = records.get((phase, "A"), []), records.get((phase, "B"), [])
            ratios = [x["gbps"] / y["gbps"] for x, y in zip(a, b) if y["gbps"] > 0]
            row["ratio"] = statistics.median(ratios) if ratios else None
        rows.append(row)
    return rows


def print_table(rows, labels):
    head = f"{'phase':9s}"
    if len(labels) == 2:
        head += f" {'A/B':>6s}"
    for label in labels:
        head += f" {label + ' GB/s':>9s} {label + ' rank CPU s/GiB':>17s}"
    head += f" {'daemon CPU s/GiB':>17s}"
    print(head)
    for row in rows:
        line = f"{row['phase']:9s}"
        if len(labels) == 2:
            line += f" {row['ratio']:5.2f}x" if row["ratio"] is not None else f" {'-':>6s}"
        daemon = "-"
        for label in labels:
            fig = row[label]
            line += f" {fig.get('gbps', 0):9.3f} {fig.get('rank_cpu_s_per_gib', 0):17.3f}"
            if "daemon_cpu_s_per_gib" in fig:
                daemon = f"{fig['daemon_cpu_s_per_gib']:.3f} ({label})"
        line += f" {daemon:>17s}"
        print(line)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", required=True, help="target A: a directory (e.g. on a ckptfs mount)")
    p.add_argument("--baseline", help="target B, run alternately with A")
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--size", type=parse_size, default=parse_size("256M"), help="bytes per rank")
    p.add_argument("--tensors", type=int, default=8, help="tensors per rank")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--phases", default="save,load,dcp_save,dcp_load")
    p.add_argument("--dcp-writer", default="stock", choices=tuple(DCP_WRITERS),
                   help="the DCP phases' storage writer and reader: stock (FileSystemWriter, "
                        "an fsync per file), nosync (sync_files=False) or ckptfs "
                        "(ckptfs.dcp.CkptfsWriter/CkptfsReader; default: %(default)s)")
    p.add_argument("--dcp-thread-count", type=int, default=None, metavar="N",
                   help="the DCP writer's thread_count (default: DCP's own)")
    p.add_argument("--dcp-file-per-tensor", action="store_true",
                   help="the DCP writer's single_file_per_rank=False: one file (and, with "
                        "the stock writer, one fsync) per tensor")
    p.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    p.add_argument("--phase-timeout", type=float, default=600,
                   help="fail when a phase runs this many seconds (0: no limit)")
    p.add_argument("--json", help="write every figure here")
    args = p.parse_args(argv)
    given = [x for x in args.phases.split(",") if x]
    unknown = [x for x in given if x not in PHASES]
    args.phases = [x for x in PHASES if x in given]  # saves before their loads
    if unknown or not args.phases:
        p.error(f"--phases: unknown {','.join(unknown) or '(none given)'}; "
                f"choose from {','.join(PHASES)}")
    if args.ranks < 1 or args.repeat < 1 or args.tensors < 1:
        p.error("--ranks, --repeat and --tensors must be >= 1")
    if args.phase_timeout < 0:
        p.error("--phase-timeout must be >= 0")
    if args.dcp_thread_count is not None and args.dcp_thread_count < 1:
        p.error("--dcp-thread-count must be >= 1")
    import torch
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    elif args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch sees no GPU here")
    notes = {}
    if any(x.startswith("dcp_") for x in args.phases):
        try:
            import torch.distributed.checkpoint  # noqa: F401
        except Exception as e:
            notes["dcp"] = f"DCP phases skipped: torch.distributed.checkpoint does not import ({e})"
            args.phases = [x for x in args.phases if not x.startswith("dcp_")]
    dcp = any(x.startswith("dcp_") for x in args.phases)
    ckptfs = None  # the package; not in args, which the ranks are sent
    if dcp and args.dcp_writer == "ckptfs":
        try:
            ckptfs = import_ckptfs()
            import ckptfs.dcp  # noqa: F401
        except Exception as e:
            print(f"torch_storm: --dcp-writer ckptfs: the ckptfs package does not import ({e}); "
                  f"pip install {os.path.join(REPO, 'python')}", file=sys.stderr)
            return 2
    targets = [("A", args.dir)] + ([("B", args.baseline)] if args.baseline else [])
    for label, root in targets:
        try:
            os.makedirs(root, exist_ok=True)
        except OSError as e:
            print(f"torch_storm: target {label}: cannot create {root}: {e.strerror}", file=sys.stderr)
            return 1
    # SIGTERM (timeout(1), a wrapper script) ends the run as an exception
    # would: the ranks are stopped and the step directories removed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    work = tempfile.mkdtemp(prefix="torch_storm.")
    args.pg_file = os.path.join(work, "pg")  # the DCP phases' gloo rendezvous
    print(f"torch_storm: torch {torch.__version__} on {args.device}, {args.ranks} ranks x "
          f"{args.size / (1 << 20):.0f} MiB in {args.tensors} bf16 tensors, {args.repeat} repeats")
    for label, root in targets:
        print(f"  {label}: {root} ({fs_type(root) or 'unknown fs'})")
    writers = {}
    if dcp:
        writers = {label: dcp_writer_on(args.dcp_writer, root) for label, root in targets}
        threads = args.dcp_thread_count or dcp_default_thread_count()
        print(f"  DCP writer {args.dcp_writer}: {DCP_WRITERS[args.dcp_writer]}; "
              f"thread_count {threads}")
        for label, root in targets:
            if writers[label] == FALLBACK:
                notes[f"fallback {label}"] = (
                    f"{label} is not on a ckptfs mount: its DCP phases ran CkptfsWriter's "
                    "fallback, the stock FileSystemWriter (an fsync per file, no commit), "
                    "and FileSystemReader")
                print(f"  {label}: not on a ckptfs mount: DCP falls back to the stock "
                      "writer (an fsync per file, no commit)")
    ranks = Ranks(args)
    made = set()
    checkpoints = []
    try:
        records = run_storm(args, targets, ranks, notes, made, checkpoints, ckptfs)
    except Exception as e:
        print(f"torch_storm: failed: {e}", file=sys.stderr)
        return 1
    finally:
        ranks.close()
        for d in made:
            remove_step(d, ckptfs)
        shutil.rmtree(work, ignore_errors=True)
    for note in notes.values():
        print(f"  note: {note}")
    labels = [label for label, _ in targets]
    rows = summarize(args, records, labels)
    print()
    print_table(rows, labels)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "device": args.device, "ranks": args.ranks,
                       "size": args.size, "repeat": args.repeat, "notes": list(notes.values()),
                       "dcp_writer": args.dcp_writer if dcp else None,
                       "dcp_thread_count": (args.dcp_thread_count or dcp_default_thread_count()
                                            if dcp else None),
                       "dcp_file_per_tensor": args.dcp_file_per_tensor if dcp else None,
                       "tensors": args.tensors,
                       "dcp_writers": writers, "checkpoints": checkpoints,
                       "summary": rows,
                       "records": [{"phase": ph, "target": t, "repeats": figs}
                                   for (ph, t), figs in records.items()]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
