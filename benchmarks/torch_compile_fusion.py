"""torch.compile as the lowerer of fused groups of torch-backed jit programs (lower_torch.py).

Measured on ``jit(grad(chain))`` on torch tensors, single-threaded: the first call (trace,
lowering, compilation, run) in a fresh process and the median of later calls, fused and unfused.

    OMP_NUM_THREADS=1 python benchmarks/torch_compile_fusion.py --n 65536 --mode fused

One process per (n, mode): torch.compile's caches would make a second first call cheaper.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import arrayad as ad  # noqa: E402
from arrayad._jit import executable  # noqa: E402
from arrayad.func import grad  # noqa: E402


def chain(x):
    s = ad.sin(x) * ad.cos(x) + ad.exp(-x * x)
    y = ad.tanh(s) * 2 - s / 3
    return ad.sum(ad.log(1 + y * y))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=65536)
    p.add_argument("--mode", choices=["fused", "unfused"], default="fused")
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--dtype", default="float64")
    args = p.parse_args()
    torch.set_num_threads(1)
    # (for the whole process: the settings are part of the jit cache key, so every call below
    # must run under them; compiled when staged: the first call includes it)
    ad.config.update("jit_torch_compile_after", 0.0)
    ad.config.update("jit_fuse", args.mode == "fused")
    x = torch.as_tensor(np.random.default_rng(0).standard_normal(args.n),
                        dtype=getattr(torch, args.dtype))
    j = ad.jit(grad(chain))
    t0 = time.perf_counter()
    j(x)       # (traced, lowered)
    j(x)       # (the first replay: compiled here for torch.compile)
    first = time.perf_counter() - t0
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        g = j(x)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    xs = x.clone().requires_grad_()
    xs.grad = None
    for _ in range(args.repeat):
        xs.grad = None
        s = torch.sin(xs) * torch.cos(xs) + torch.exp(-xs * xs)
        y = torch.tanh(s) * 2 - s / 3
        torch.sum(torch.log(1 + y * y)).backward()
    eager = (time.perf_counter() - t0) / args.repeat
    ref = xs.grad
    err = float(torch.max(torch.abs(g - ref)))
    fused = executable(j.lower(x)).fused is not None
    assert fused == (args.mode == "fused"), "the program was not lowered as asked"
    print(f"n={args.n} {args.mode:8s} first call (two calls: trace, replay) {first:7.3f} s  "
          f"median {statistics.median(times) * 1e3:8.3f} ms  torch eager backward "
          f"{eager * 1e3:8.3f} ms  max |diff| {err:.1e}")


if __name__ == "__main__":
    main()
