"""Performance across commits with asv, single-threaded, on the workloads stable on one core.

    python tools/asv_history.py compare 45b8346 HEAD    # asv continuous --factor 1.1: fails on a
                                                       # slowdown of more than 10%
    python tools/asv_history.py history 10             # the last 10 commits of main, then the
                                                       # history pages (asv publish)
    python tools/asv_history.py history 200 --step 25  # every 25th of the last 200

asv builds each commit in a virtualenv of its own (``asv_bench/asv.conf.json``), so any commit
with the Cython build can be timed, and results stay in ``asv_bench/results`` (one machine file
per machine: ``asv machine --yes`` is run first). The results are committed; the documentation
build publishes them into the site (``benchmark-history/``, linked from the performance page).
The subset: per-call overhead of the
transforms and of the eager tape on small NumPy inputs (``STABLE``), where one core gives
repeatable figures; the large-array, memory and Dask benchmarks vary with the machine's load
and are left to full ``asv run``s.
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ASV_DIR = os.path.join(ROOT, "asv_bench")

# asv's --bench regular expression
STABLE = r"^(transforms\.Chain16|transforms\.MLP|overhead\.Traced|overhead\.Eager)\."

ONE_THREAD = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


def asv(*args):
    env = dict(os.environ, **ONE_THREAD)
    print("+ asv " + " ".join(args), flush=True)
    return subprocess.run(["asv", *args], cwd=ASV_DIR, env=env).returncode


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare", help="asv continuous between two commits")
    c.add_argument("base")
    c.add_argument("head", nargs="?", default="HEAD")
    c.add_argument("--factor", default="1.1")
    h = sub.add_parser("history", help="time the last N commits of main and publish the pages")
    h.add_argument("n", type=int)
    h.add_argument("--step", type=int, default=1, help="time every STEP-th of them")
    for p in (c, h):
        p.add_argument("--bench", default=STABLE, help="asv --bench regex (default: %(default)s)")
    args = ap.parse_args(argv)

    if asv("machine", "--yes") != 0:
        return 1
    if args.cmd == "compare":
        return asv("continuous", "--factor", args.factor, "--split", "--show-stderr",
                   "--bench", args.bench, args.base, args.head)
    # (main's own commits, newest first: merged branches' commits are not timed)
    commits = subprocess.run(["git", "log", "--first-parent", "--format=%H", f"-{args.n}"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    listing = os.path.join(ASV_DIR, ".asv", "history_commits.txt")
    os.makedirs(os.path.dirname(listing), exist_ok=True)
    with open(listing, "w") as f:
        f.write("\n".join(commits[::args.step]) + "\n")
    rc = asv("run", "--skip-existing-successful", "--bench", args.bench, f"HASHFILE:{listing}")
    if rc == 0:
        rc = asv("publish")
        print(f"history pages: {os.path.join('asv_bench', 'html', 'index.html')}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
