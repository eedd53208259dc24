"""One rank of a checkpoint save, as a training script does it, for the
checkpoint integration tests (checkpoint_*_test.cc). Uses only the ckptfs
module (PYTHONPATH=<repo>/python) and the standard library.

  save DIR RANK [options]   write this rank's files, then commit
  verify DIR --ranks N ...  check every rank's files hold their bytes
  watch RUN_DIR ...         until a stop file appears, check that every
                            checkpoint listed as committed is complete
  call FUNC ARG...          ckptfs.FUNC(ARG...) ("all" as the last ARG of
                            checkpoints means all=True); prints its result

Output lines the tests read: "READY" once this rank's files are written (and
just before it commits), then "RESULT ok state=S" or "RESULT error
errno=NAME state=S message=TEXT"; "VERIFY ok" / "VERIFY bad ..."; "WATCH
checks=C violations=V errors=E"; "CALL ok JSON" / "CALL error errno=NAME
message=TEXT". Exit status 0 unless the script itself
went wrong (an unexpected exception).
"""

import argparse
import errno
import json
import os
import pickle
import signal
import sys
import time

import ckptfs


def pattern(rank, index, size):
    """`size` bytes determined by (rank, index)."""
    block = bytes((rank * 37 + index * 11 + k) % 251 for k in range(65536))
    reps = size // len(block) + 1
    return (block * reps)[:size]


def file_name(rank, index, dcp):
    return "__%d_%d.distcp" % (rank, index) if dcp else "rank%d_%d.bin" % (rank, index)


def say(*words):
    print(*words, flush=True)


def write_file(path, data, fsync, keep_open=False):
    f = open(path, "wb")
    try:
        f.write(data)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    except BaseException:
        try:
            f.close()
        except OSError:
            pass
        raise
    if keep_open:
        return f
    f.close()
    return None


def dcp_finish(args):
    """DCP's FileSystemWriter.finish on the coordinator: .metadata.tmp,
    fsync, unlink the old .metadata, rename."""
    expected = args.bytes
    names = [file_name(r, 0, True) for r in range(args.ranks)]
    deadline = time.time() + 60
    while True:  # the collective before finish: every rank's data is written
        try:
            if all(os.stat(os.path.join(args.dir, n)).st_size == expected for n in names):
                break
        except FileNotFoundError:
            pass
        if time.time() > deadline:
            raise RuntimeError("other ranks' .distcp files never appeared")
        time.sleep(0.02)
    metadata = {"version": "new", "ranks": args.ranks, "files": names}
    tmp = os.path.join(args.dir, ".metadata.tmp")
    final = os.path.join(args.dir, ".metadata")
    with open(tmp, "wb") as f:
        pickle.dump(metadata, f)
        os.fsync(f.fileno())
    if os.path.exists(final):
        os.unlink(final)
    os.rename(tmp, final)


def save(args):
    if args.declare:
        ckptfs.declare(args.dir, args.declare, timeout_s=args.timeout_s)
    if args.dcp and args.rank == 0:
        # A previous attempt's metadata, which finish() replaces.
        with open(os.path.join(args.dir, ".metadata"), "wb") as f:
            pickle.dump({"version": "old"}, f)
    held = None
    for i in range(args.files):
        path = os.path.join(args.dir, file_name(args.rank, i, args.dcp))
        last = i == args.files - 1
        try:
            held = write_file(path, pattern(args.rank, i, args.bytes), args.fsync or args.dcp,
                              keep_open=last and (args.hold_open or args.die_after_write))
        except OSError as e:
            if not args.write_fails:
                raise
            say("WRITE_FAILED errno=%s" % errno.errorcode.get(e.errno, e.errno))
    if args.dcp and args.rank == 0:
        dcp_finish(args)
    if args.die_after_write:
        say("READY")
        while True:  # killed by the test, mid-save
            time.sleep(1)
    if args.wait_file:
        while not os.path.exists(args.wait_file):
            time.sleep(0.02)
    signal.signal(signal.SIGUSR1, lambda *_: None)  # an interrupt the commit must survive
    say("READY")
    try:
        ckptfs.commit(args.dir, args.rank)
        if args.commit_twice:
            ckptfs.commit(args.dir, args.rank)
        say("RESULT ok state=%s" % ckptfs.state(args.dir))
    except OSError as e:
        try:
            state = ckptfs.state(args.dir)
        except OSError:
            state = "unreadable"
        say("RESULT error errno=%s state=%s message=%s"
            % (errno.errorcode.get(e.errno, e.errno), state, e.strerror))
    if held is not None:
        try:
            held.close()
        except OSError:
            pass


def verify_dir(directory, ranks, files, size, dcp):
    """"" if every file is complete and right, else what is wrong."""
    for r in range(ranks):
        for i in range(files):
            path = os.path.join(directory, file_name(r, i, dcp))
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError as e:
                return "%s: %s" % (path, e.strerror)
            if data != pattern(r, i, size):
                return "%s: %d bytes, not the %d written" % (path, len(data), size)
    return ""


def verify(args):
    problem = verify_dir(args.dir, args.ranks, args.files, args.bytes, args.dcp)
    say("VERIFY ok" if not problem else "VERIFY bad " + problem)


def watch(args):
    checks = violations = errors = 0
    verified = set()
    while not os.path.exists(args.stop_file):
        try:
            for c in ckptfs.checkpoints(args.dir):
                checks += 1
                if c["state"] != "committed":
                    violations += 1
                    say("VIOLATION %s listed as %s" % (c["name"], c["state"]))
                if c["name"] in verified:
                    continue
                problem = verify_dir(c["path"], args.ranks, args.files, args.bytes, False)
                if problem:
                    violations += 1
                    say("VIOLATION %s committed but %s" % (c["name"], problem))
                verified.add(c["name"])
            newest = ckptfs.latest(args.dir)
            if newest is not None and ckptfs.state(newest) != "committed":
                violations += 1
                say("VIOLATION latest names %s" % newest)
        except OSError:
            errors += 1  # the metadata service is down for a moment
        time.sleep(0.05)
    say("WATCH checks=%d violations=%d errors=%d verified=%d"
        % (checks, violations, errors, len(verified)))


def call(args):
    func = getattr(ckptfs, args.func)
    kwargs = {}
    values = list(args.args)
    if args.func == "checkpoints" and values[-1:] == ["all"]:
        values.pop()
        kwargs["all"] = True
    try:
        result = func(*values, **kwargs)
    except OSError as e:
        say("CALL error errno=%s message=%s" % (errno.errorcode.get(e.errno, e.errno), e))
        return
    if isinstance(result, list):
        result = [{k: c[k] for k in ("name", "state", "ranks", "arrived", "path")}
                  for c in result]
    say("CALL ok " + json.dumps(result))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("save")
    p.add_argument("dir")
    p.add_argument("rank", type=int)
    p.add_argument("--declare", type=int, metavar="N", help="declare DIR for N ranks first")
    p.add_argument("--timeout-s", type=int)
    p.add_argument("--files", type=int, default=1)
    p.add_argument("--bytes", type=int, default=1 << 20)
    p.add_argument("--ranks", type=int, default=0, help="all ranks (DCP's coordinator)")
    p.add_argument("--fsync", action="store_true")
    p.add_argument("--dcp", action="store_true", help="DCP's file names and finish()")
    p.add_argument("--hold-open", action="store_true",
                   help="commit with the last file still open for writing")
    p.add_argument("--die-after-write", action="store_true",
                   help="leave the last file open and wait to be killed")
    p.add_argument("--write-fails", action="store_true", help="a failing write is expected")
    p.add_argument("--wait-file", help="commit only once this file exists")
    p.add_argument("--commit-twice", action="store_true")
    p.set_defaults(run=save)
    p = sub.add_parser("verify")
    p.add_argument("dir")
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--files", type=int, default=1)
    p.add_argument("--bytes", type=int, default=1 << 20)
    p.add_argument("--dcp", action="store_true")
    p.set_defaults(run=verify)
    p = sub.add_parser("watch")
    p.add_argument("dir")
    p.add_argument("--stop-file", required=True)
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--files", type=int, default=1)
    p.add_argument("--bytes", type=int, default=1 << 20)
    p.set_defaults(run=watch)
    p = sub.add_parser("call")
    p.add_argument("func", choices=["declare", "commit", "state", "info", "latest",
                                    "checkpoints", "keep", "remove"])
    p.add_argument("args", nargs="*")
    p.set_defaults(run=call)
    args = parser.parse_args()
    args.run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
