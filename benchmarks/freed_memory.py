#!/usr/bin/env python
"""Eager arrayad with and without ``config.reuse_freed_memory`` (NOTE [freed memory] in
``arrayad/backends/numpy.py``): GradBench's gmm (objective and gradient) and log-sum-exp
(value and gradient), written as its arrayad tool writes them, each in a fresh process per
setting, single-threaded, CPU time (the best of ``--repeat`` rounds of five calls).

Run: ``python benchmarks/freed_memory.py [--repeat 20] [--markdown]``.
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

CASES = [("gmm objective", "gmm", "objective", (10, 5, 1000)),
         ("gmm gradient", "gmm", "jacobian", (10, 5, 1000)),
         ("gmm objective", "gmm", "objective", (64, 10, 1000)),
         ("gmm gradient", "gmm", "jacobian", (64, 10, 1000)),
         ("lse value", "lse", "logsumexp", (160_000,)),
         ("lse gradient", "lse", "gradient", (160_000,)),
         ("lse value", "lse", "logsumexp", (640_000,)),
         ("lse gradient", "lse", "gradient", (640_000,))]

CHILD = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, {tools!r})
from arrayad_tool import gmm, lse
import arrayad as ad
repeat = {repeat}
rng = np.random.default_rng(0)
out = []
for label, module, name, size in {cases!r}:
    if module == "gmm":
        d, k, n = size
        args = (rng.standard_normal(k), rng.standard_normal((k, d)), rng.standard_normal((k, d)),
                rng.standard_normal((k, d * (d - 1) // 2)), rng.standard_normal((n, d)), 0, 1.0)
    else:
        args = (rng.standard_normal(size),)
    f = getattr(gmm if module == "gmm" else lse, name)
    f(*args)
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        for _ in range(5):
            f(*args)
        best = min(best, (time.process_time() - t) / 5)
    out.append(best)
print(json.dumps([ad.config.read("reuse_freed_memory"), out]))
"""


def run(on, repeat):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1", ARRAYAD_REUSE_FREED_MEMORY="1" if on else "0")
    code = CHILD.format(tools=os.path.join(HERE, "gradbench"), repeat=repeat, cases=CASES)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True)
    state, times = json.loads(done.stdout)
    return state, times


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = ap.parse_args(argv)
    on_state, on = run(True, args.repeat)
    off_state, off = run(False, args.repeat)
    if not on_state:
        print("(the allocator was left alone: not glibc, or MALLOC_*_ set in the environment)")
    rows = []
    for (label, module, name, size), a, b in zip(CASES, off, on):
        what = f"{label} ({'d, k, n = ' + ', '.join(map(str, size)) if module == 'gmm' else f'n = {size[0]:,}'})"
        rows.append((what, b * 1e3, a * 1e3, b / a))
    if args.markdown:
        print("| eager, single thread | kept (default) | handed back | ratio |")
        print("|---|---:|---:|---:|")
        for what, b, a, r in rows:
            print(f"| {what} | {b:.2f} ms | {a:.2f} ms | {r:.2f}x |")
    else:
        for what, b, a, r in rows:
            print(f"{what:45s} kept {b:8.2f} ms   handed back {a:8.2f} ms   {r:5.2f}x")


if __name__ == "__main__":
    main()
