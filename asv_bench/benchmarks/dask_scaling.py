"""Dask: gradients against the same gradients written by hand in Dask (the cheap cases of
``benchmarks/dask_scaling.py``, which also measures least squares and a cluster, in subprocesses).

``peakmem_`` is the whole process's peak RSS: compare the ``hand`` and ``arrayad`` rows of one
case. Single-threaded scheduler (``threads``, one worker).
"""
import numpy as np

from . import common


def _graph(case, impl):
    import dask.array as da

    import arrayad as ad
    from arrayad.func import grad

    if case == "sum_xw":   # grad over w of sum(x * w), x (n, 8) chunked by rows
        n = common.big(4_000_000)
        x = da.random.default_rng(0).standard_normal((n, 8), chunks=(max(n // 16, 1), 8))
        w = da.from_array(np.linspace(-1, 1, 8))
        return da.sum(x, axis=0) if impl == "hand" else grad(lambda w: ad.sum(x * w))(w)
    # grad of sum(sin(x[idx])): a scatter-add of k values into n
    n = common.big(1_000_000)
    x = da.random.default_rng(0).standard_normal((n,), chunks=(max(n // 4, 1),))
    idx = da.from_array(np.random.default_rng(1).integers(0, n, n // 100))
    if impl == "hand":
        return da.bincount(idx, weights=da.cos(x[idx]), minlength=n)
    return grad(lambda x: ad.sum(ad.sin(x[idx])))(x)


class DaskGradients:
    params = [["sum_xw", "getitem"], ["hand", "arrayad"]]
    param_names = ["case", "impl"]

    def setup(self, case, impl):
        try:
            import dask
        except ImportError:
            raise NotImplementedError("dask is not installed")
        self.graph = _graph(case, impl)
        self.config = dask.config.set(scheduler="threads", num_workers=1)

    def teardown(self, case, impl):
        self.config.__exit__(None, None, None)

    def time_compute(self, case, impl):
        self.graph.compute()

    def peakmem_compute(self, case, impl):
        self.graph.compute()

    def track_tasks(self, case, impl):
        return len(self.graph.__dask_graph__())
