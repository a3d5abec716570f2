"""Memory and time of the reverse pass of long loops under each checkpoint schedule.

The rows of the table in docs/control_flow.md ("Reverse mode through unbounded and long loops"):

* a 20,000-step ``fori_loop`` over 10,000 float64 values (every carry is 80 kB: keeping them all
  is 1.6 GB), its gradient with every carry kept and with budgets of 512 and 128 carries;
* 10**6 RK4 steps of a 4-state linear ODE, its gradient with every carry kept and with 32,
  against the forward pass alone (and that forward pass in the numba tier from its first call);
* a ``while_loop`` whose trip count depends on the values (5,000 steps over 1,000 values), its
  gradient with the default budget (1,024) and with every state kept.

Peak memory is Python's tracemalloc peak during one gradient (NumPy's allocations are traced):
what the reverse pass holds, not the process's resident size. Times are wall-clock, the best of
``--repeat`` runs after a first (warm) one, single-threaded (OMP_NUM_THREADS=1).

    OMP_NUM_THREADS=1 python benchmarks/loop_checkpoints.py [--quick] [--markdown FILE]
"""

import argparse
import datetime
import os
import time
import tracemalloc

import numpy as np

import arrayad as ad
from arrayad import func as F


def best_time(fn, repeat):
    fn()   # (warm: traces, compiles)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def peak_bytes(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def long_loop(steps, size):
    x0 = np.linspace(0.1, 1.0, size)
    p = np.full(size, 0.5)

    def loss(p, checkpoint):
        c = F.fori_loop(0, steps, lambda i, c: c + 1e-4 * (ad.sin(c) * p - c), x0,
                        checkpoint=checkpoint)
        return ad.sum(c * c)
    return p, loss


def rk4(steps):
    y0 = np.array([1.0, 0.0, 0.5, 0.1])
    a = np.array([[0.0, 1.0, 0.0, 0.0], [-1.0, -0.1, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0],
                  [0.1, 0.0, -2.0, 0.0]])
    dt = 1e-4

    def rhs(y, th):
        return ad.stack([y[1], -th[0] * y[0] - th[1] * y[1], y[3], -th[2] * y[2] + 0.1 * y[0]])

    def step(i, y, th):
        k1 = rhs(y, th)
        k2 = rhs(y + dt / 2 * k1, th)
        k3 = rhs(y + dt / 2 * k2, th)
        k4 = rhs(y + dt * k3, th)
        return y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)

    def loss(th, checkpoint):
        y = F.fori_loop(0, steps, lambda i, y: step(i, y, th), y0, checkpoint=checkpoint)
        return ad.sum(y * y)
    del a
    return np.array([1.0, 0.1, 2.0]), loss


def newton_like(size, limit):
    x0 = np.linspace(1.0, 2.0, size)

    def loss(p, checkpoint):
        def body(v):
            c, k = v
            return c * 1.001 + 1e-3 * ad.sin(c * p), k + 1
        c, _ = F.while_loop(lambda v: ad.sum(v[0]) < limit, body, (x0, ad.asarray(0)),
                            checkpoint=checkpoint)
        return ad.sum(c)
    return np.full(size, 0.3), loss


def trips(size, limit):
    c, k = np.linspace(1.0, 2.0, size), 0
    while c.sum() < limit:
        c, k = c * 1.001 + 1e-3 * np.sin(c * 0.3), k + 1
    return k


def rows(quick, repeat):
    out = []
    steps, size = (2_000, 1_000) if quick else (20_000, 10_000)
    p, loss = long_loop(steps, size)
    base_t = base_m = None
    for ck in ("all", 512, 128):
        g = ad.jit(F.grad(lambda p, ck=ck: loss(p, ck)))
        t = best_time(lambda: g(p), repeat)
        m = peak_bytes(lambda: g(p))
        if ck == "all":
            base_t, base_m = t, m
        out.append((f"`fori_loop`, {steps:,} steps x {size:,} values", f"`{ck!r}`",
                    t, m, t / base_t, m / base_m))
    steps = 100_000 if quick else 1_000_000
    th, loss = rk4(steps)
    fwd = ad.jit(lambda th: loss(th, "all"))
    t_fwd = best_time(lambda: fwd(th), repeat)
    out.append((f"RK4, {steps:,} steps x 4 values", "forward pass", t_fwd, None, 1.0, None))
    for ck in ("all", 32):
        g = ad.jit(F.grad(lambda th, ck=ck: loss(th, ck)))
        t = best_time(lambda: g(th), repeat)
        m = peak_bytes(lambda: g(th))
        out.append((f"RK4, {steps:,} steps x 4 values", f"`{ck!r}`", t, m, t / t_fwd, None))
    # (the forward pass above runs in the register machine, as a program's first calls do: numba
    # takes a scan once the machine has spent a second in it, NOTE [compiled scan]; this row is
    # the forward pass in numba from its first call)
    from arrayad._jit import scan as tiers
    after, tiers.NUMBA_AFTER = tiers.NUMBA_AFTER, 0.0
    try:
        fwd = ad.jit(lambda th: loss(th, "all"))
        t = best_time(lambda: fwd(th), repeat)
    finally:
        tiers.NUMBA_AFTER = after
    out.append((f"RK4, {steps:,} steps x 4 values", "forward pass, numba tier", t, None,
                t / t_fwd, None))
    size, limit = (200, 200 * 1.5 * 5) if quick else (1_000, 1_000 * 1.5 * 150)
    n = trips(size, limit)
    p, loss = newton_like(size, limit)
    fwd = ad.jit(lambda p: loss(p, None))
    t_fwd = best_time(lambda: fwd(p), repeat)
    label = f"`while_loop`, {n:,} steps x {size:,} values"
    out.append((label, "forward pass", t_fwd, None, 1.0, None))
    for ck in (None, "all"):
        g = ad.jit(F.grad(lambda p, ck=ck: loss(p, ck)))
        t = best_time(lambda: g(p), repeat)
        m = peak_bytes(lambda: g(p))
        out.append((label, "default (1,024)" if ck is None else f"`{ck!r}`", t, m, t / t_fwd,
                    None))
    return out


def markdown(table, started):
    lines = [f"Run {started:%Y-%m-%d %H:%M} UTC, `OMP_NUM_THREADS=1 python "
             f"benchmarks/loop_checkpoints.py`, NumPy {np.__version__}, arrayad.jit of grad.",
             "",
             "| loop | checkpoint | time | peak memory | time / reference | memory / every carry |",
             "|---|---|---|---|---|---|"]
    for loop, ck, t, m, tr, mr in table:
        mem = "-" if m is None else f"{m / 1e6:,.1f} MB" if m >= 1e5 else f"{m / 1e3:,.1f} kB"
        mrs = "-" if mr is None else f"{100 * mr:.1f}%"
        lines.append(f"| {loop} | {ck} | {t * 1e3:,.0f} ms | {mem} | {tr:.2f}x | {mrs} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args()
    if os.environ.get("OMP_NUM_THREADS") != "1":
        print("note: set OMP_NUM_THREADS=1 for single-threaded figures")
    started = datetime.datetime.now(datetime.timezone.utc)
    text = markdown(rows(args.quick, args.repeat), started)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
