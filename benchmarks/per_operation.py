"""Where the time of a small gradient goes: ``grad`` of the 16-element chain of compare.py timed
stage by stage, and the same gradient written by hand in NumPy (the floor of any library that
calls NumPy once per operation). Its table is the one on the performance page ("Where the time
goes"); run it single-threaded, on a quiet machine:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
        python benchmarks/per_operation.py [--markdown] [--profile]

With ``--profile`` (Linux, ``perf`` installed) it also samples the native stacks of a loop of
the same call and says where the samples fall: NumPy, each module of arrayad's compiled core,
and Python code (the function, the transforms' wrappers, the rules' formulas).

Each stage is the median of interleaved repetitions (every stage timed once per round, so that a
change of load hits them alike) of the best of a few loops, in CPU time per call.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import arrayad as ad  # noqa: E402
from arrayad._core._core import GradInterpreter, run_backward  # noqa: E402
from arrayad.func import _unit_cotangent, grad  # noqa: E402

N_OPS = 15   # the chain's operations: 14 elementwise and the sum


def chain(xp, x):
    s = xp.sin(x) * xp.cos(x) + xp.exp(-x * x)
    y = xp.tanh(s) * 2 - s / 3
    return xp.sum(xp.log(1 + y * y))


def chain_and_gradient_by_hand(x):
    """The chain and its gradient in NumPy, as a tape would compute it: each operation's
    derivative times its cotangent, the cotangents of a value used twice added."""
    a, b = np.sin(x), np.cos(x)
    p = a * b
    nx = -x
    q = nx * x
    e = np.exp(q)
    s = p + e
    th = np.tanh(s)
    y = th * 2 - s / 3
    z = 1 + y * y
    np.sum(np.log(z))
    gz = np.broadcast_to(np.ones(()), z.shape) / z
    gy = gz * y + gz * y
    gs = -gy / 3 + gy * 2 * (1 - th * th)
    gq = gs * e
    gx = gq * nx - gq * x
    return gx + gs * b * b - gs * a * a


def stages(x):
    f = lambda v: chain(ad, v)   # noqa: E731
    g = grad(f)

    def traced():   # (grad's trace of one array, without its checks)
        with GradInterpreter() as interp:
            t = interp.new_input(x)
            return t._node, interp.output(f(t))

    def traced_and_pulled_back():   # (and its pullback from 1, without handing the result out)
        node, (value, edge) = traced()
        want = {(node, 0): None}
        run_backward([edge], [_unit_cotangent(value)], False, False, want, False, None)
        return want[(node, 0)]

    def eager():
        t = ad.tensor(x, requires_grad=True)
        f(t).backward()
        return t.grad

    return [
        ("the NumPy forward pass alone (the floor of the forward)", lambda: chain(np, x)),
        ("the same operations as arrayad functions on NumPy arrays, nothing recorded",
         lambda: f(x)),
        ("... recorded by `grad` (tracers, tape nodes, `process`)", traced),
        ("... and the backward pass", traced_and_pulled_back),
        ("the whole `grad(chain)(x)` call", lambda: g(x)),
        ("the eager `tensor(x)`, the chain and `.backward()`", eager),
        ("the chain and its gradient written by hand in NumPy (the floor of the gradient)",
         lambda: chain_and_gradient_by_hand(x)),
    ]


def per_call(fn, loops):
    t0 = time.process_time()
    for _ in range(loops):
        fn()
    return (time.process_time() - t0) / loops * 1e6


def measure(rounds=15, loops=400):
    x = np.random.default_rng(0).standard_normal(16)
    named = stages(x)
    times = {name: [] for name, _ in named}
    for _ in range(rounds):
        for name, fn in named:
            times[name].append(min(per_call(fn, loops) for _ in range(3)))
    return [(name, statistics.median(times[name])) for name, _ in named]


def table(results, markdown):
    floor = results[0][1]
    rows, previous = [], None
    for i, (name, us) in enumerate(results):
        per_op = ""
        if 1 <= i <= 3:   # (the stages that add to the one before them)
            per_op = f"+{(us - previous) / N_OPS:.2f} us"
        rows.append((name, f"{us:.1f} us", f"{us / floor:.2f}x", per_op))
        previous = us
    head = ("stage, 16 float64 elements", "per call", "/ NumPy forward", "added per operation")
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|---|---:|---:|---:|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
    else:
        lines = ["  ".join(head)] + ["  ".join(r) for r in rows]
    return "\n".join(lines)


# -- where the samples of a profile fall -----------------------------------------------------------

LOOP = """
import sys
sys.path[:0] = [{root!r}, {here!r}]
import numpy as np
import arrayad as ad
from per_operation import chain
x = np.random.default_rng(0).standard_normal(16)
g = ad.func.grad(lambda v: chain(ad, v))
for _ in range({calls}):
    g(x)
"""

# where a sample's innermost frame of arrayad's compiled core lies, by module
CORE_MODULES = {"_arrays": "dispatch and recording (`bind`, tape nodes, the eager tape)",
                "_interp": "the interpreters' `process` (tracers, saved values)",
                "_zeros": "the rule shapes and structural zeros",
                "_tape": "the backward engine (order, rule calls, accumulation)",
                "_base": "finding the backend and the implementation",
                "_small_arith": "small float64 arithmetic, without NumPy's dispatch"}


def profile(calls=40000):
    """Shares of the samples of ``calls`` calls of ``grad(chain)(x)`` under ``perf record``
    (Linux; ``perf`` must be installed): NumPy's own code, each module of the core (the
    innermost of its frames in the sample), and the rest (the interpreter running Python code:
    the function, ``grad``'s wrapper, the rules written in Python)."""
    import re
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        script, data = os.path.join(tmp, "loop.py"), os.path.join(tmp, "perf.data")
        with open(script, "w") as f:
            here = os.path.dirname(os.path.abspath(__file__))
            f.write(LOOP.format(calls=calls, root=os.path.dirname(here), here=here))
        subprocess.run(["perf", "record", "-q", "-F", "1500", "--call-graph", "dwarf,16384",
                        "-o", data, sys.executable, script], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        text = subprocess.run(["perf", "script", "-i", data], check=True, capture_output=True,
                              text=True).stdout
    shares, total = {}, 0
    for sample in text.split("\n\n"):
        frames = [line.split(None, 1)[1] for line in sample.strip().split("\n")[1:]
                  if len(line.split(None, 1)) == 2]
        if not frames or any(("mport" in f or "Initialize" in f or "Finalize" in f
                              or "pymain_init" in f) for f in frames):
            continue   # (starting Python, importing, exiting: not the loop)
        total += 1
        where = "Python: the function, the transforms' wrappers, the rules' formulas"
        for f in frames:   # (innermost first)
            if "_multiarray_umath" in f or "libm." in f or "ufunc" in f:
                where = "NumPy computing and dispatching"
                break
            m = re.search(r"__pyx_\w+?_7arrayad_5_core_(\d+)", f)   # (Cython's mangled name:
            module = m and f[m.end():m.end() + int(m.group(1))]       # the module's length, name)
            if module in CORE_MODULES:
                where = CORE_MODULES[module]
                break
        shares[where] = shares.get(where, 0) + 1
    return {k: v / total for k, v in sorted(shares.items(), key=lambda kv: -kv[1])}, total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--profile", action="store_true",
                    help="also sample the native stacks of 40,000 calls with perf (Linux)")
    args = ap.parse_args()
    threads = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, NumPy {np.__version__}, "
          f"threads {threads}")
    print(table(measure(args.rounds), args.markdown))
    if args.profile:
        shares, n = profile()
        print(f"\nwhere the {n} samples of grad(chain)(x) fell:")
        if args.markdown:
            print("\n| where | share |\n|---|---:|")
        for where, share in shares.items():
            print(f"| {where} | {share:.0%} |" if args.markdown else f"{share:5.0%}  {where}")


if __name__ == "__main__":
    main()
