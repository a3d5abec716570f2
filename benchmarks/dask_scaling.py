"""Dask at scale: arrayad's gradients against the same gradients written by hand in Dask.

Each case runs twice in a fresh subprocess, once as ``arrayad.func.grad`` of the loss and once as
the hand-written Dask expression of its gradient, on the same lazily generated inputs (same
chunks, same seed, same scheduler). A subprocess reports the growth of its peak resident memory
during ``compute()`` (``ru_maxrss`` after building the graph -> after computing) and the best
wall time of its computes. Where a compute takes under 10 s, the times in the table are instead
the medians of both gradients computed alternately in a third process (a shared machine's load
then shifts both alike). ``--full``: X of lstsq is 25.6 GB, generated chunk by chunk. The table
shows both figures and arrayad's ratio to the hand-written one.

Cases (default sizes run in about a minute; ``--full`` for the issue's sizes):

  lstsq      grad of mean((X @ w - y) ** 2), X (n, 8) float64 chunked by rows, never in memory
  sum_xw     grad over w of sum(x * w), x (n, 8)
  getitem    grad of sum(sin(x[idx])), x (n,), k random indices (hand: da.bincount)
  sort       grad of sum(sort(x)[:k] ** 2), x (n,) (hand: argsort + da.bincount)
  slice      grad of sum(sin(x[1:-1])), x (n,) chunked (hand: the cotangent padded with da.pad)
  diff       grad of sum(sin(diff(x))) (hand: pad(g, (1, 0)) - pad(g, (0, 1)))
  concat     grad of sum(sin(concat([x[:1], x, x[-1:]]))) (edge padding; hand: da.concatenate)
  movavg     grad of sum(sin(moving average of 3)) (hand: three padded cotangents)
  hessian    hessian of the lstsq loss (hand: (2 / n) X.T @ X)
  vmap_chunk vmap(grad(lstsq loss), chunk_size=k) over B = 4k weight vectors (Dask, chunks of
             k rows), X (n, 8) (hand: the per-sample gradients as one matmul on the same chunks)
  cluster    lstsq on a dask.distributed LocalCluster (2 worker processes, 1 thread each): both
             gradients on one cluster, computed alternately; median wall time and the workers'
             CPU time (no memory figure: both run on the same workers)

Usage: python benchmarks/dask_scaling.py [--full] [--cases lstsq,sum_xw,...] [--repeat N]
Single-threaded: the scheduler is "threads" with one worker, and BLAS is pinned to one thread.
"""
import argparse
import json
import os
import subprocess
import sys
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

SIZES = {
    # case: (default, --full)
    "lstsq": (dict(n=4_000_000, chunk=250_000), dict(n=400_000_000, chunk=1_000_000)),
    "sum_xw": (dict(n=4_000_000, chunk=250_000), dict(n=40_000_000, chunk=1_000_000)),
    "getitem": (dict(n=1_000_000, k=10_000, chunk=250_000),) * 2,   # (the size)
    "sort": (dict(n=1_000_000, k=10_000, chunk=250_000),) * 2,
    "slice": (dict(n=10_000_000, chunk=1_000_000), dict(n=100_000_000, chunk=2_000_000)),
    "diff": (dict(n=10_000_000, chunk=1_000_000), dict(n=100_000_000, chunk=2_000_000)),
    "concat": (dict(n=10_000_000, chunk=1_000_000), dict(n=100_000_000, chunk=2_000_000)),
    "movavg": (dict(n=10_000_000, chunk=1_000_000), dict(n=100_000_000, chunk=2_000_000)),
    "hessian": (dict(n=4_000_000, chunk=250_000), dict(n=40_000_000, chunk=1_000_000)),
    "vmap_chunk": (dict(n=1_000_000, chunk=125_000, k=8), dict(n=10_000_000, chunk=500_000, k=8)),
    "cluster": (dict(n=2_000_000, chunk=250_000), dict(n=20_000_000, chunk=1_000_000)),
}


# -- one measurement (in a subprocess) -------------------------------------------------------------
def _build(case, impl, n, chunk, k=None):
    import numpy as np
    import dask.array as da

    d = 8
    if case in ("lstsq", "cluster"):
        X = da.random.default_rng(0).standard_normal((n, d), chunks=(chunk, d))
        y = da.random.default_rng(1).standard_normal((n,), chunks=(chunk,))
        w = da.from_array(np.linspace(-1, 1, d))
        if impl == "hand":
            return (2.0 / n) * (X.T @ (X @ w - y))
        import arrayad as ad
        from arrayad.func import grad
        return grad(lambda w: ad.mean((X @ w - y) ** 2))(w)
    if case == "hessian":
        X = da.random.default_rng(0).standard_normal((n, d), chunks=(chunk, d))
        y = da.random.default_rng(1).standard_normal((n,), chunks=(chunk,))
        w = da.from_array(np.linspace(-1, 1, d))
        if impl == "hand":
            return (2.0 / n) * (X.T @ X)
        import arrayad as ad
        from arrayad.func import hessian
        return hessian(lambda w: ad.mean((X @ w - y) ** 2))(w)
    if case == "sum_xw":
        x = da.random.default_rng(0).standard_normal((n, d), chunks=(chunk, d))
        w = da.from_array(np.linspace(-1, 1, d))
        if impl == "hand":
            return da.sum(x, axis=0)
        import arrayad as ad
        from arrayad.func import grad
        return grad(lambda w: ad.sum(x * w))(w)
    if case == "vmap_chunk":
        # per-sample gradients of lstsq for B = 4k weight vectors, k at a time
        X = da.random.default_rng(0).standard_normal((n, d), chunks=(chunk, d))
        y = da.random.default_rng(1).standard_normal((n,), chunks=(chunk,))
        B = 4 * k
        W = da.from_array(np.linspace(-1, 1, B * d).reshape(B, d), chunks=(k, d))
        if impl == "hand":
            return ((2.0 / n) * (X.T @ (X @ W.T - y[:, None]))).T
        import arrayad as ad
        from arrayad.func import grad, vmap
        return vmap(grad(lambda w: ad.mean((X @ w - y) ** 2)), chunk_size=k)(W)
    x = da.random.default_rng(0).standard_normal((n,), chunks=(chunk,))
    if case in ("slice", "diff", "concat", "movavg"):
        # losses of slices along the chunked axis; by hand, the cotangents padded into place.
        # The gradient is reduced to its sum of squares, so that the peak measured is the
        # working memory and not the n-element result.
        return da.sum(_chunked_axis(case, impl, x) ** 2)
    if case == "getitem":
        idx = da.from_array(np.random.default_rng(1).integers(0, n, k))
        if impl == "hand":
            return da.bincount(idx, weights=da.cos(x[idx]), minlength=n)
        import arrayad as ad
        from arrayad.func import grad
        return grad(lambda x: ad.sum(ad.sin(x[idx])))(x)
    if case == "sort":
        if impl == "hand":
            order = da.argsort(x)[:k] if hasattr(da, "argsort") else None
            if order is None:
                from array_api_compat.dask import array as cda
                order = cda.argsort(x)[:k]
            return da.bincount(order, weights=2 * x[order], minlength=n)
        import arrayad as ad
        from arrayad.func import grad
        return grad(lambda x: ad.sum(ad.sort(x)[:k] ** 2))(x)
    raise ValueError(case)


def _chunked_axis(case, impl, x):
    import dask.array as da
    if impl == "hand":
        pad = da.pad
        if case == "slice":
            return pad(da.cos(x[1:-1]), (1, 1))
        if case == "diff":
            g = da.cos(x[1:] - x[:-1])
            return pad(g, (1, 0)) - pad(g, (0, 1))
        if case == "concat":   # edge padding: x's first and last elements twice
            g = da.cos(x)
            return da.concatenate([2 * g[:1], g[1:-1], 2 * g[-1:]])
        g = da.cos((x[2:] + x[1:-1] + x[:-2]) / 3) / 3
        return pad(g, (2, 0)) + pad(g, (1, 1)) + pad(g, (0, 2))
    import arrayad as ad
    from arrayad.func import grad
    loss = {"slice": lambda x: ad.sum(ad.sin(x[1:-1])),
            "diff": lambda x: ad.sum(ad.sin(ad.diff(x))),
            "concat": lambda x: ad.sum(ad.sin(ad.concat([x[:1], x, x[-1:]]))),
            "movavg": lambda x: ad.sum(ad.sin((x[2:] + x[1:-1] + x[:-2]) / 3))}[case]
    return grad(loss)(x)


def _measure(case, impl, params, repeat):
    import resource

    import dask
    import numpy as np

    if case == "cluster":
        return _measure_cluster(params, repeat)
    t0 = time.perf_counter()
    g = _build(case, impl, **params)
    build = time.perf_counter() - t0
    dask.config.set(scheduler="threads", num_workers=1)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    while len(times) < repeat or (sum(times) < 1.0 and len(times) < 50):   # (short cases: more)
        t0 = time.perf_counter()
        out = g.compute()
        times.append(time.perf_counter() - t0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
    return dict(case=case, impl=impl, time_s=min(times), build_s=build, peak_mib=peak / 1024,
                tasks=len(g.__dask_graph__()), checksum=float(np.sum(out)))


def _measure_alternating(case, params, repeat):
    """Both gradients in one process, computed alternately (at least ``repeat`` times each,
    more while that takes under two seconds): the median times, which a shared machine's load
    shifts alike."""
    import dask
    import numpy as np

    graphs = {impl: _build(case, impl, **params) for impl in ("hand", "arrayad")}
    dask.config.set(scheduler="threads", num_workers=1)
    times = {impl: [] for impl in graphs}
    for g in graphs.values():
        g.compute()   # (warm-up)
    while len(times["hand"]) < repeat or (sum(times["hand"]) + sum(times["arrayad"]) < 2.0
                                          and len(times["hand"]) < 50):
        for impl, g in graphs.items():
            t0 = time.perf_counter()
            g.compute()
            times[impl].append(time.perf_counter() - t0)
    return {impl: float(np.median(t)) for impl, t in times.items()}


def _worker_usage():
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_maxrss


def _measure_cluster(params, repeat):
    """Both gradients on one cluster, computed alternately (so that both see the same load):
    the median wall time and the workers' CPU time (the workers' peak memory would mix the two)."""
    import numpy as np
    from distributed import Client, LocalCluster

    graphs = {impl: _build("lstsq", impl, **params) for impl in ("hand", "arrayad")}
    res = {impl: dict(case="cluster", impl=impl, times=[], cpus=[]) for impl in graphs}
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for _ in range(repeat + 1):   # (the first round warms the workers up)
            for impl, g in graphs.items():
                before = client.run(_worker_usage)
                t0 = time.perf_counter()
                out = client.compute(g, sync=True)
                res[impl]["times"].append(time.perf_counter() - t0)
                after = client.run(_worker_usage)
                res[impl]["cpus"].append(sum(after[w][0] - before[w][0] for w in after))
                res[impl]["checksum"] = float(np.sum(out))
    for impl, r in res.items():
        r.update(time_s=float(np.median(r.pop("times")[1:])),
                 cpu_s=float(np.median(r.pop("cpus")[1:])),
                 tasks=len(graphs[impl].__dask_graph__()))
    return res


def _run(case, impl, params, repeat):
    cmd = [sys.executable, __file__, "--one", json.dumps(dict(case=case, impl=impl,
                                                               params=params, repeat=repeat))]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if out.returncode:
        raise RuntimeError(f"{case}/{impl} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--full", action="store_true", help="the large sizes (minutes)")
    p.add_argument("--cases", default=",".join(SIZES))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--one", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.one:
        job = json.loads(a.one)
        if job["impl"] == "alternating":
            print(json.dumps(_measure_alternating(job["case"], job["params"], job["repeat"])))
        else:
            print(json.dumps(_measure(job["case"], job["impl"], job["params"], job["repeat"])))
        return
    rows = []
    for case in a.cases.split(","):
        params = SIZES[case][1 if a.full else 0]
        if case == "cluster":
            both = _run(case, "both", params, a.repeat)
            hand, mine = both["hand"], both["arrayad"]
        else:
            hand = _run(case, "hand", params, a.repeat)
            mine = _run(case, "arrayad", params, a.repeat)
            if hand["time_s"] < 10:
                # short computes: the medians of alternating runs in one process
                t = _run(case, "alternating", params, a.repeat)
                hand["time_s"], mine["time_s"] = t["hand"], t["arrayad"]
        if abs(hand["checksum"] - mine["checksum"]) > 1e-6 * max(1.0, abs(hand["checksum"])):
            raise RuntimeError(f"{case}: arrayad's gradient differs from the hand-written one "
                               f"({mine['checksum']} vs {hand['checksum']})")
        rows.append((case, params, hand, mine))
        print(f"# {case} done", file=sys.stderr)
    print("| case | size | hand time (s) | arrayad time (s) | time ratio | hand peak (MiB) "
          "| arrayad peak (MiB) | memory ratio | tasks hand / arrayad |")
    print("|---|---|---|---|---|---|---|---|---|")
    for case, params, hand, mine in rows:
        size = ", ".join(f"{k}={v:.3g}" if v >= 1e5 else f"{k}={v}" for k, v in params.items())
        mem = "- | - | -" if case == "cluster" else (
            f"{hand['peak_mib']:.0f} | {mine['peak_mib']:.0f} | "
            f"{mine['peak_mib'] / max(hand['peak_mib'], 1):.2f}")
        print(f"| {case} | {size} | {hand['time_s']:.3f} | {mine['time_s']:.3f} | "
              f"{mine['time_s'] / hand['time_s']:.2f} | {mem} | "
              f"{hand['tasks']} / {mine['tasks']} |")
    for case, params, hand, mine in rows:
        if "cpu_s" in hand:
            print(f"\n{case}: workers' CPU time {hand['cpu_s']:.3f} s by hand, "
                  f"{mine['cpu_s']:.3f} s with arrayad (ratio "
                  f"{mine['cpu_s'] / hand['cpu_s']:.2f}); times are medians of {a.repeat} "
                  f"alternating computes on one cluster")


if __name__ == "__main__":
    main()
