"""How far ``jit``'s vector math is from NumPy's functions, in ulps (NOTE [vector math] in
``arrayad/_jit/vector_math.py``).

By default ``jit``'s tiled replay computes float64 ``sin``, ``cos``, ``exp``, ``log``, ``tanh``,
``expm1`` and ``log1p`` with the GNU C library's vector functions (``libmvec``) where eager code
calls NumPy's. This script calls both on the same inputs (for each function, a few ranges of a
million values each, uniform and log-uniform, and the special values) and prints, per function
and range, how many results differ from NumPy's and by how many ulps at most (the distance
between the two float64 values: 1 = neighbours). Where ``np.longdouble`` has more precision
than float64 (x86-64), it also prints each one's largest error against the long double result
(in ulps of the float64 result, fractional), which says which of the two is nearer.

    python tools/vector_math_ulps.py [--n 1000000] [--seed 0]

The result depends on the processor (the AVX-512, AVX2 and SSE2 versions differ in their last
bits) and the C library's version; the header says which were used.
"""

import argparse
import platform
import sys

import numpy as np

sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.dirname(
    __import__("os").path.abspath(__file__))))

from arrayad._core import _vector_math  # noqa: E402
from arrayad._jit import vector_math  # noqa: E402


def ordinal(x):
    """float64 -> int64, monotonic: neighbouring floats differ by 1 (-0.0 and 0.0 are one)."""
    i = np.asarray(x, np.float64).view(np.int64)
    return np.where(i < 0, np.int64(-2**63) - i, i)


def ulps_apart(a, b):
    """The number of float64 steps between a and b; 0 where both are nan or equal."""
    with np.errstate(over="ignore"):   # (int64 differences: exact for close values)
        d = np.abs(ordinal(a) - ordinal(b)).astype(np.float64)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    d[same] = 0
    d[np.isnan(a) != np.isnan(b)] = np.inf
    return d


def error_ulps(y, ref):
    """|y - ref| in ulps of y (ref: a long double result), where both are finite."""
    ok = np.isfinite(y) & np.isfinite(ref)
    err = np.zeros(y.shape)
    spacing = np.spacing(np.abs(y[ok])).astype(np.longdouble)
    err[ok] = np.abs((y[ok].astype(np.longdouble) - ref[ok]) / spacing).astype(np.float64)
    return err


def log_uniform(rng, lo, hi, n, signed=False):
    x = np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    return x * rng.choice([-1.0, 1.0], n) if signed else x


def ranges(name, rng, n):
    """[(label, inputs)] for ``name``."""
    u = lambda lo, hi: rng.uniform(lo, hi, n)   # noqa: E731
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324,
                        2.2250738585072014e-308, 1.0, -1.0, 0.5])
    table = {
        "sin": [("[-pi, pi]", u(-np.pi, np.pi)), ("[-1e3, 1e3]", u(-1e3, 1e3)),
                ("[-1e5, 1e5]", u(-1e5, 1e5)),
                ("|x| in [1e-300, 1e300]", log_uniform(rng, 1e-300, 1e300, n, True))],
        "exp": [("[-1, 1]", u(-1, 1)), ("[-745, 709.7]", u(-745, 709.7)),
                ("|x| in [1e-300, 1]", log_uniform(rng, 1e-300, 1, n, True))],
        "log": [("[0.5, 2]", u(0.5, 2)), ("[1e-308, 1e308]", log_uniform(rng, 1e-308, 1e308, n)),
                ("subnormal", u(5e-324, 2.2e-308))],
        "tanh": [("[-1, 1]", u(-1, 1)), ("[-20, 20]", u(-20, 20)),
                 ("|x| in [1e-300, 1e3]", log_uniform(rng, 1e-300, 1e3, n, True))],
        "expm1": [("[-1, 1]", u(-1, 1)), ("[-40, 709.7]", u(-40, 709.7)),
                  ("|x| in [1e-300, 1]", log_uniform(rng, 1e-300, 1, n, True))],
        "log1p": [("[-0.5, 1]", u(-0.5, 1)), ("[-0.5, -1e-16]", -log_uniform(rng, 1e-16, 0.5, n)),
                  ("[1e-300, 1e308]", log_uniform(rng, 1e-300, 1e308, n))],
    }
    table["cos"] = table["sin"]
    return table[name] + [("special values", special)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="values per range")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if not vector_math.ADDRESSES:
        print("no vector math here (libmvec not found, or not x86-64): jit calls NumPy's "
              "functions and matches eager bit for bit")
        return 0
    precise = np.finfo(np.longdouble).nmant > np.finfo(np.float64).nmant
    print(f"{platform.processor() or platform.machine()}, {platform.libc_ver()}, NumPy "
          f"{np.__version__}, vector width {_vector_math.width()} float64, "
          f"{args.n:,} values per range, seed {args.seed}")
    header = (f"{'function':<8} {'inputs':<24} {'differ':>8} {'max ulps':>9}"
              + (f" {'numpy err':>10} {'libmvec err':>12}" if precise else "") + "  worst input")
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(args.seed)
    worst = {}
    for name in vector_math.NAMES:
        if name not in vector_math.ADDRESSES:
            print(f"{name:<8} not in this C library")
            continue
        f = getattr(np, name)
        for label, x in ranges(name, rng, args.n):
            x = np.ascontiguousarray(x, np.float64)
            ours = np.empty_like(x)
            _vector_math.apply(vector_math.ADDRESSES[name], x, ours)
            with np.errstate(all="ignore"):
                theirs = f(x)
                d = ulps_apart(ours, theirs)
                line = (f"{name:<8} {label:<24} {np.mean(d > 0):>8.2%} {d.max():>9g}")
                if precise:
                    ref = f(x.astype(np.longdouble))
                    line += (f" {error_ulps(theirs, ref).max():>10.2f}"
                             f" {error_ulps(ours, ref).max():>12.2f}")
            k = int(np.argmax(d))
            print(line + (f"  {x[k]!r}" if d[k] else ""))
            worst[name] = max(worst.get(name, 0), d.max())
    print("largest difference from NumPy, ulps: "
          + ", ".join(f"{n} {worst[n]:g}" for n in worst))
    return 0


if __name__ == "__main__":
    sys.exit(main())
