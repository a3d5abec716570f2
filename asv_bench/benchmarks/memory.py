"""Memory: peak RSS of grad on 1,000,000 elements, and RSS growth over many calls (leaks).

asv's ``peakmem_`` is the peak RSS of the whole benchmark process (imports and setup included),
so ``ChainPeakMem`` also reports a do-nothing baseline and the plain forward pass: what grad
itself costs is ``peakmem_grad - peakmem_baseline`` (the 1M-element input alone is 8 MB).
"""
import gc
import os
import sys

from arrayad import func

from . import common
from .common import chain


class ChainPeakMem:
    params = common.BACKENDS
    param_names = ["backend"]

    def setup(self, backend):
        common.get_backend(backend)
        self.x = common.data(backend, "x_big")
        self.grad = func.grad(chain)

    def peakmem_baseline(self, backend):
        pass

    def peakmem_forward(self, backend):
        chain(self.x)

    def peakmem_grad(self, backend):
        self.grad(self.x)


def rss_mb():
    """Current resident set size of this process in MB (10**6 bytes)."""
    try:
        import psutil
    except ImportError:
        pass
    else:
        return psutil.Process().memory_info().rss / 1e6
    try:  # Linux without psutil: the second field is the resident page count
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    except (OSError, ValueError):
        pass
    import resource

    # last resort: the *peak* RSS (kB on Linux, bytes on macOS); growth still shows a leak
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1e6 if sys.platform == "darwin" else peak / 1e3


def rss_growth(fn, calls, warmup=200):
    """RSS growth in MB over ``calls`` calls of ``fn``, after ``warmup`` calls.

    The warm-up fills caches and the allocator's pools, so that only growth that keeps going
    (a leak) is counted; a collection before each reading removes garbage still in cycles.
    """
    for _ in range(common.leak_calls(warmup)):
        fn()
    gc.collect()
    before = rss_mb()
    for _ in range(calls):
        fn()
    gc.collect()
    return rss_mb() - before


class Leak:
    """RSS growth over 10,000 calls (20 in smoke mode); a value near 0 means no leak."""

    params = common.BACKENDS
    param_names = ["backend"]
    unit = "MB"
    rounds = 1  # one process is enough for a growth figure; each run takes seconds to a minute
    timeout = 300
    calls = 10_000

    def setup(self, backend):
        common.get_backend(backend)
        self.x = common.data(backend, "x16")
        self.X = common.data(backend, "vmap_X")
        self.grad = func.grad(chain)
        self.vmap_grad = func.vmap(func.grad(chain))

    def track_rss_growth_grad(self, backend):
        return rss_growth(lambda: self.grad(self.x), common.leak_calls(self.calls))

    def track_rss_growth_vmap_grad(self, backend):
        return rss_growth(lambda: self.vmap_grad(self.X), common.leak_calls(self.calls))
