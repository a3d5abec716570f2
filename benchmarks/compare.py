#!/usr/bin/env python
"""Side-by-side benchmark: arrayad vs. torch.func, HIPS autograd and JAX.

Runs the same float64 workloads, single-threaded, in one process on every
installed library and prints microseconds per call, plus ratio tables.
See benchmarks/README.md for details, or run with ``--help``.
"""

# --- thread / precision settings: must happen before numpy/torch/jax load ---
import os

THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    "JAX_ENABLE_X64": "1",
}
os.environ.update(THREAD_ENV)
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import datetime  # noqa: E402
import gc  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

import numpy as np  # noqa: E402

# ---------------------------------------------------------------------------
# Optional libraries.  Each import failure is recorded and the library skipped.
# ---------------------------------------------------------------------------

IMPORT_NOTES = {}  # library key -> reason it is unavailable
VERSIONS = {"python": platform.python_version(), "numpy": np.__version__}

try:
    import torch
    import torch.func as tfunc

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # only allowed before any inter-op work started
        pass
    VERSIONS["torch"] = torch.__version__
except Exception as exc:  # pragma: no cover - depends on the environment
    torch = tfunc = None
    IMPORT_NOTES["torch.func"] = f"import torch failed: {exc!r}"

try:
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_platforms", "cpu")
    VERSIONS["jax"] = jax.__version__
    try:
        import jaxlib

        VERSIONS["jaxlib"] = jaxlib.__version__
    except Exception:
        pass
except Exception as exc:  # pragma: no cover
    jax = jnp = None
    IMPORT_NOTES["jax"] = IMPORT_NOTES["jax.jit"] = f"import jax failed: {exc!r}"

try:
    import autograd
    import autograd.numpy as anp

    try:
        from importlib.metadata import version as _dist_version

        VERSIONS["autograd"] = _dist_version("autograd")
    except Exception:
        VERSIONS["autograd"] = getattr(autograd, "__version__", "?")
except Exception as exc:  # pragma: no cover
    autograd = anp = None
    IMPORT_NOTES["autograd"] = f"import autograd failed: {exc!r}"

# Use the arrayad of this checkout (repo root = parent of benchmarks/) when
# run as ``python benchmarks/compare.py``; an installed copy otherwise.
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isdir(os.path.join(_REPO_ROOT, "arrayad")) and _REPO_ROOT not in sys.path:
    sys.path.insert(0, _REPO_ROOT)

try:
    import arrayad as ad
    from arrayad import func as adf

    VERSIONS["arrayad"] = getattr(ad, "__version__", "?")
except Exception as exc:
    ad = adf = None
    IMPORT_NOTES["arrayad"] = f"import arrayad failed: {type(exc).__name__}: {exc}"
    IMPORT_NOTES["arrayad.jit"] = IMPORT_NOTES["arrayad"]

try:
    import mygrad as mg

    VERSIONS["mygrad"] = getattr(mg, "__version__", "?")
except Exception as exc:
    mg = None
    IMPORT_NOTES["mygrad"] = f"not installed ({type(exc).__name__})"

# Column order of the tables.  "mygrad" only has an eager16 cell.
ALL_LIBS = ["numpy-fwd", "arrayad", "arrayad.jit", "torch.func", "autograd", "jax", "jax.jit",
            "mygrad", "arrayad.jit-unfused", "arrayad.jit-fused"]
# "arrayad.jit" is the jit as users get it: on NumPy, large elementwise groups run as the tiled
# replay (NOTE [tiled replay]). "arrayad.jit-unfused": the replay without it, one NumPy call per
# operation. "arrayad.jit-fused": the opt-in compiled fusion (numba loops) turned on and compiled
# at the first call. The last two are measured where fusion can apply (``Workload.fused``).
try:
    import numba  # noqa: F401
except Exception as exc:
    IMPORT_NOTES["arrayad.jit-fused"] = f"numba not installed ({type(exc).__name__})"
LIB_ALIASES = {
    "numpy": "numpy-fwd", "np": "numpy-fwd", "numpy-fwd": "numpy-fwd",
    "arrayad": "arrayad", "ad": "arrayad",
    "arrayad.jit": "arrayad.jit", "ad.jit": "arrayad.jit", "arrayad-jit": "arrayad.jit",
    "torch": "torch.func", "torch.func": "torch.func",
    "autograd": "autograd",
    "jax": "jax", "jax-eager": "jax",
    "jax.jit": "jax.jit", "jit": "jax.jit", "jax-jit": "jax.jit",
    "mygrad": "mygrad",
    "arrayad.jit-fused": "arrayad.jit-fused", "fused": "arrayad.jit-fused",
    "arrayad.jit-unfused": "arrayad.jit-unfused", "unfused": "arrayad.jit-unfused",
}
# The correctness reference: the first of these that produces a result.
REFERENCE_ORDER = ["torch.func", "autograd", "jax", "jax.jit"]


class NotApplicable(Exception):
    """The library has no equivalent of this workload (shown as n/a)."""


# ---------------------------------------------------------------------------
# Namespaces: the workload functions are written once against an ``xp``
# namespace providing sin/cos/exp/tanh/log/sum/mean; ``@`` and ``**`` are
# plain operators.
# ---------------------------------------------------------------------------


class _ArrayadNamespace:
    """Resolve math functions for arrayad.

    Prefers top-level ``arrayad.<name>`` (torch-style); otherwise falls back
    to the array-API namespace of the first argument
    (``x.__array_namespace__()``), and finally to NumPy.
    """

    def __getattr__(self, name):
        top = getattr(ad, name, None) if ad is not None else None
        if callable(top):
            return top

        def op(x, *args, **kwargs):
            get_ns = getattr(x, "__array_namespace__", None)
            ns = get_ns() if get_ns is not None else np
            return getattr(ns, name)(x, *args, **kwargs)

        return op


AD_NS = ad if ad is not None else _ArrayadNamespace()


def chain_vec(xp, x):
    s = xp.sin(x) * xp.cos(x) + xp.exp(-x * x)
    y = xp.tanh(s) * 2 - s / 3
    return xp.log(1 + y * y)


def chain(xp, x):
    return xp.sum(chain_vec(xp, x))


DEEP_STEPS = 200   # of 5 elementwise operations: a program 1,000 operations deep


def deep(xp, x):
    for _ in range(DEEP_STEPS):
        x = xp.sin(x) * 0.5 + xp.cos(x * 0.7)
    return xp.sum(x)


def mlp_loss(xp, x, w1, w2, y):
    return xp.mean((xp.tanh(x @ w1) @ w2 - y) ** 2)


def loss1(xp, w1, w2, x, y):  # one example: x (128,), y (10,)
    return xp.sum((xp.tanh(x @ w1) @ w2 - y) ** 2)


def layer(xp, W, b, x):
    return xp.tanh(W @ x + b)


def bind(fn, xp):
    """``fn(xp, *args)`` -> ``f(*args)``."""

    def f(*args):
        return fn(xp, *args)

    f.__name__ = fn.__name__
    return f


# ---------------------------------------------------------------------------
# Data (float64, fixed seed) and per-library conversion.
# ---------------------------------------------------------------------------


def make_data(seed=0):
    rng = np.random.default_rng(seed)
    d = {}
    d["x16"] = rng.standard_normal(16)
    d["x1m"] = rng.standard_normal(1_000_000)
    d["x4k"] = rng.standard_normal(4096)
    d["x64k"] = rng.standard_normal(65536)
    d["x64"] = rng.standard_normal(64)
    d["mlp_x"] = rng.standard_normal((64, 128))
    d["mlp_w1"] = rng.standard_normal((128, 256)) / np.sqrt(128)
    d["mlp_w2"] = rng.standard_normal((256, 10)) / np.sqrt(256)
    d["mlp_y"] = rng.standard_normal((64, 10))
    d["jac_W"] = rng.standard_normal((128, 128)) / np.sqrt(128)
    d["jac_b"] = rng.standard_normal(128)
    d["jac_x"] = rng.standard_normal(128)
    d["vj_X"] = rng.standard_normal((64, 16))
    d["rk4_th"] = np.array([1.0, 0.1, 0.5, 0.2])
    d["rk4_y0"] = np.array([1.0, 0.0, -0.5, 0.2])
    for v in d.values():
        assert v.dtype == np.float64
    return d


def to_torch(a):
    return torch.tensor(a, dtype=torch.float64)


def to_jax(a):
    return jax.block_until_ready(jnp.asarray(a, dtype=jnp.float64))


def to_numpy_tree(r):
    """Flatten a result (array / tuple / list) into a list of NumPy arrays."""
    if isinstance(r, (tuple, list)):
        out = []
        for item in r:
            out.extend(to_numpy_tree(item))
        return out
    if torch is not None and isinstance(r, torch.Tensor):
        return [r.detach().cpu().numpy()]
    if isinstance(r, np.ndarray):
        return [r]
    for attr in ("numpy", "to_numpy"):  # e.g. tensor wrappers
        m = getattr(r, attr, None)
        if callable(m) and not isinstance(r, np.generic):
            try:
                return [np.asarray(m())]
            except Exception:
                pass
    data = getattr(r, "data", None)  # mygrad / arrayad style wrappers
    if isinstance(data, np.ndarray):
        return [data]
    return [np.asarray(r)]


def results_match(res, ref, rtol=1e-6):
    """Return None if equal, else a short reason."""
    a, b = to_numpy_tree(res), to_numpy_tree(ref)
    if len(a) != len(b):
        return f"{len(a)} outputs vs {len(b)} in reference"
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape:
            return f"output {i}: shape {x.shape} vs reference {y.shape}"
        if x.dtype != y.dtype:
            return f"output {i}: dtype {x.dtype} vs reference {y.dtype}"
        if not np.allclose(x, y, rtol=rtol):
            err = float(np.max(np.abs(x.astype(np.float64) - y)))
            return f"output {i}: max abs diff {err:.3g}"
    return None


# ---------------------------------------------------------------------------
# Workloads.  Each builder returns a zero-argument callable that performs one
# call (including ``block_until_ready`` for JAX); transforms are built once,
# outside the timed region.  Raise NotApplicable for "n/a" cells.
# ---------------------------------------------------------------------------


def _jax_call(fn, *args):
    def run():
        return jax.block_until_ready(fn(*args))

    return run


def vmap_of(T, fn, in_dims=0):
    """``T.vmap(fn, in_dims)``; JAX spells the keyword ``in_axes``."""
    if jax is not None and T is jax:
        return jax.vmap(fn, in_axes=in_dims)
    return T.vmap(fn, in_dims=in_dims)


def _transform_cell(lib, make_fn, np_args, n_a_reason=None):
    """Generic cell: ``make_fn(T, xp)`` returns the transformed function,
    where T is the transform module (adf / torch.func / jax)."""
    if lib == "arrayad":
        fn = make_fn(adf, AD_NS)
        return lambda: fn(*np_args)
    if lib == "arrayad.jit":
        fn = ad.jit(make_fn(adf, AD_NS))
        return lambda: fn(*np_args)
    if lib in ("arrayad.jit-fused", "arrayad.jit-unfused"):
        return _fused_run(ad.jit(make_fn(adf, AD_NS)), np_args, lib == "arrayad.jit-fused")
    if lib == "torch.func":
        fn = make_fn(tfunc, torch)
        args = [to_torch(a) for a in np_args]
        return lambda: fn(*args)
    if lib in ("jax", "jax.jit"):
        fn = make_fn(jax, jnp)
        if lib == "jax.jit":
            fn = jax.jit(fn)
        return _jax_call(fn, *[to_jax(a) for a in np_args])
    raise NotApplicable(n_a_reason or "no equivalent")


def _fused_run(fn, args, on=True):
    """A call of the jitted ``fn`` whose first call stages its program with numba's loops
    (``on``), compiling them at once (so that the cell's first call counts the compilation), or
    unfused; never tiled; the later calls replay it (under the same settings: they are part of
    the jit cache key)."""
    from arrayad._jit import fusion, lower_numba

    lower_numba.register()   # (numba's loops for NumPy: not arrayad's default, NOTE [tiled replay])

    def run():
        with fusion.turned(on, fuse_after=0, tiles=False):
            return fn(*args)

    return run


class Workload:
    def __init__(self, name, desc, floor, cells, heavy=False, fused=False, settle=0.0):
        self.name = name
        self.desc = desc
        self.floor = floor  # data -> zero-arg callable (NumPy forward)
        self.cells = cells  # (lib, data) -> zero-arg callable
        self.heavy = heavy
        self.fused = fused  # measure the -fused and -unfused columns (large elementwise programs)
        # seconds of calls before arrayad's cells are measured: their steady state, as jax.jit's
        # is measured after its compilation (a scan moves from arrayad's register machine to
        # numba once the machine has spent a second in it: NOTE [compiled scan])
        self.settle = settle


# (why the fused column is empty elsewhere: one note for all of them)
FUSED_NA = "fusion is measured on the large elementwise chains only"


def _chain_grad_cell(key, fn=chain):
    def cells(lib, d):
        x = d[key]
        if lib == "autograd":
            g = autograd.grad(bind(fn, anp))
            return lambda: g(x)
        if lib == "mygrad":
            raise NotApplicable("eager only (see eager16)")
        return _transform_cell(lib, lambda T, xp: T.grad(bind(fn, xp)), [x])

    return cells


def _eager16_cell(lib, d):
    x_np = d["x16"]
    if lib == "arrayad":
        def run():
            x = ad.tensor(x_np, requires_grad=True)
            chain(AD_NS, x).backward()
            return x.grad
        return run
    if lib == "arrayad.jit":  # the eager tape records the staged program's primitives
        jchain = ad.jit(bind(chain, AD_NS))

        def run():
            x = ad.tensor(x_np, requires_grad=True)
            jchain(x).backward()
            return x.grad
        return run
    if lib == "torch.func":  # plain torch autograd, eager
        def run():
            x = torch.tensor(x_np, requires_grad=True)
            chain(torch, x).backward()
            return x.grad
        return run
    if lib == "mygrad":
        def run():
            x = mg.tensor(x_np)
            chain(mg, x).backward()
            return x.grad
        return run
    if lib == "autograd":
        raise NotApplicable("functional only, no eager .backward()")
    raise NotApplicable("no eager tape (functional API only)")


def _mlp_cell(lib, d):
    args = [d["mlp_x"], d["mlp_w1"], d["mlp_w2"], d["mlp_y"]]
    if lib == "autograd":
        g = autograd.grad(bind(mlp_loss, anp), argnum=(1, 2))
        return lambda: g(*args)
    if lib == "mygrad":
        raise NotApplicable("eager only")
    return _transform_cell(lib, lambda T, xp: T.grad(bind(mlp_loss, xp), argnums=(1, 2)), args)


def _jac_cell(mode):
    def cells(lib, d):
        W, b, x = d["jac_W"], d["jac_b"], d["jac_x"]
        if lib == "autograd":
            if mode == "jacfwd":
                raise NotApplicable("no forward mode")
            g = autograd.jacobian(lambda v: layer(anp, W, b, v))
            return lambda: g(x)
        if lib == "mygrad":
            raise NotApplicable("no jacobian transform")
        if lib in ("arrayad", "arrayad.jit"):
            Wc, bc = W, b
        elif lib == "torch.func":
            Wc, bc = to_torch(W), to_torch(b)
        elif lib in ("jax", "jax.jit"):
            Wc, bc = to_jax(W), to_jax(b)
        else:
            raise NotApplicable("no equivalent")

        def make(T, xp):
            return getattr(T, mode)(lambda v: layer(xp, Wc, bc, v))

        return _transform_cell(lib, make, [x])

    return cells


def _hessian_cell(lib, d):
    x = d["x16"]
    if lib == "autograd":
        h = autograd.hessian(bind(chain, anp))
        return lambda: h(x)
    if lib == "mygrad":
        raise NotApplicable("no hessian transform")
    return _transform_cell(lib, lambda T, xp: T.hessian(bind(chain, xp)), [x])


_IN_DIMS = (None, None, 0, 0)


def _psg_cell(lib, d):
    args = [d["mlp_w1"], d["mlp_w2"], d["mlp_x"], d["mlp_y"]]
    if lib == "autograd":
        g = autograd.grad(bind(loss1, anp), argnum=(0, 1))
        w1, w2, X, Y = args

        def run():  # no vmap in autograd: Python loop over the batch
            gs = [g(w1, w2, X[i], Y[i]) for i in range(X.shape[0])]
            return np.stack([a for a, _ in gs]), np.stack([b for _, b in gs])

        return run
    if lib == "mygrad":
        raise NotApplicable("no vmap")

    def make(T, xp):
        return vmap_of(T, T.grad(bind(loss1, xp), argnums=(0, 1)), _IN_DIMS)

    return _transform_cell(lib, make, args)


def _vmap_fwd_cell(lib, d):
    args = [d["mlp_w1"], d["mlp_w2"], d["mlp_x"], d["mlp_y"]]
    if lib == "autograd":
        raise NotApplicable("no vmap (forward is plain NumPy = floor)")
    if lib == "mygrad":
        raise NotApplicable("no vmap")
    return _transform_cell(lib, lambda T, xp: vmap_of(T, bind(loss1, xp), _IN_DIMS), args)


def _vmap_jacfwd_cell(lib, d):
    X = d["vj_X"]
    if lib == "autograd":
        raise NotApplicable("no forward mode, no vmap")
    if lib == "mygrad":
        raise NotApplicable("no vmap")
    return _transform_cell(lib, lambda T, xp: vmap_of(T, T.jacfwd(bind(chain_vec, xp))), [X])


def _floor_chain(key, fn=chain):
    return lambda d: (lambda: fn(np, d[key]))


def _floor_mlp(d):
    x, w1, w2, y = d["mlp_x"], d["mlp_w1"], d["mlp_w2"], d["mlp_y"]
    return lambda: mlp_loss(np, x, w1, w2, y)


def _floor_layer(d):
    W, b, x = d["jac_W"], d["jac_b"], d["jac_x"]
    return lambda: layer(np, W, b, x)


def _floor_batched_loss(d):
    X, w1, w2, Y = d["mlp_x"], d["mlp_w1"], d["mlp_w2"], d["mlp_y"]
    return lambda: np.sum((np.tanh(X @ w1) @ w2 - Y) ** 2, axis=1)


def handwritten_per_sample_grads(d):
    """Per-sample gradients of ``loss1`` written by hand in NumPy (outer products of the
    batched activations and errors): the cost of producing the 64 x (128 x 256 + 256 x 10)
    result at all, next to which the batched forward pass is no floor."""
    X, w1, w2, Y = d["mlp_x"], d["mlp_w1"], d["mlp_w2"], d["mlp_y"]

    def run():
        h = np.tanh(X @ w1)
        err = 2 * (h @ w2 - Y)
        gw2 = h[:, :, None] * err[:, None, :]
        dz = (err @ w2.T) * (1 - h * h)
        gw1 = X[:, :, None] * dz[:, None, :]
        return gw1, gw2

    return run


def _floor_vj(d):
    X = d["vj_X"]
    return lambda: chain_vec(np, X)


# grad of a 10,000-step RK4 integration of a 4-state system (two coupled damped oscillators,
# one with a cubic spring) wrt its 4 parameters: arrayad and JAX with their scan (one loop
# primitive), torch.func and autograd with the Python loop unrolled on their tape.
RK4_STEPS, RK4_DT = 10_000, 1e-3


def _rk4_rhs(xp, th, y):
    x1, v1, x2, v2 = y[0], y[1], y[2], y[3]
    a1 = -th[0] * x1 - th[1] * v1 + th[2] * (x2 - x1) - th[3] * x1 ** 3
    a2 = -th[0] * x2 - th[1] * v2 + th[2] * (x1 - x2)
    return xp.stack([v1, a1, v2, a2])


def _rk4_step(xp, th, y):
    k1 = _rk4_rhs(xp, th, y)
    k2 = _rk4_rhs(xp, th, y + RK4_DT / 2 * k1)
    k3 = _rk4_rhs(xp, th, y + RK4_DT / 2 * k2)
    k4 = _rk4_rhs(xp, th, y + RK4_DT * k3)
    return y + RK4_DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


def rk4_loss_loop(xp, th, y0):
    y = y0
    for _ in range(RK4_STEPS):
        y = _rk4_step(xp, th, y)
    return xp.sum(y ** 2)


def rk4_loss_scan(xp, scan, th, y0):
    y, _ = scan(lambda y, _: (_rk4_step(xp, th, y), None), y0, None, length=RK4_STEPS)
    return xp.sum(y ** 2)


def _floor_rk4(d):
    return lambda: rk4_loss_loop(np, d["rk4_th"], d["rk4_y0"])


def _rk4_cell(lib, d):
    th, y0 = d["rk4_th"], d["rk4_y0"]
    if lib in ("arrayad", "arrayad.jit"):
        g = adf.grad(lambda t, y: rk4_loss_scan(AD_NS, adf.scan, t, y))
        if lib == "arrayad.jit":
            g = ad.jit(g)
        return lambda: g(th, y0)
    if lib in ("jax", "jax.jit"):
        g = jax.grad(lambda t, y: rk4_loss_scan(jnp, jax.lax.scan, t, y))
        if lib == "jax.jit":
            g = jax.jit(g)
        return _jax_call(g, to_jax(th), to_jax(y0))
    if lib == "torch.func":
        g = tfunc.grad(lambda t, y: rk4_loss_loop(torch, t, y))
        tt, ty = to_torch(th), to_torch(y0)
        return lambda: g(tt, ty)
    raise NotApplicable("a 10,000-step Python loop on its tape: not timed")


def rk4_loss_scan_ckpt(xp, scan, checkpoint, th, y0):
    # checkpoint on every step: JAX's way of keeping only the carry per step
    step = checkpoint(lambda y, _: (_rk4_step(xp, th, y), None))
    y, _ = scan(step, y0, None, length=RK4_STEPS)
    return xp.sum(y ** 2)


def _rk4_ckpt_cell(lib, d):
    th, y0 = d["rk4_th"], d["rk4_y0"]
    if lib in ("arrayad", "arrayad.jit"):
        g = adf.grad(lambda t, y: rk4_loss_scan_ckpt(AD_NS, adf.scan, adf.checkpoint, t, y))
        if lib == "arrayad.jit":
            g = ad.jit(g)
        return lambda: g(th, y0)
    if lib in ("jax", "jax.jit"):
        g = jax.grad(lambda t, y: rk4_loss_scan_ckpt(jnp, jax.lax.scan, jax.checkpoint, t, y))
        if lib == "jax.jit":
            g = jax.jit(g)
        return _jax_call(g, to_jax(th), to_jax(y0))
    if lib == "torch.func":
        raise NotApplicable("torch.utils.checkpoint does not run under torch.func transforms")
    raise NotApplicable("a 10,000-step Python loop on its tape: not timed")


WORKLOADS = [
    Workload("chain16", "grad of elementwise chain, n=16", _floor_chain("x16"), _chain_grad_cell("x16")),
    Workload("chain4k", "grad of elementwise chain, n=4096", _floor_chain("x4k"), _chain_grad_cell("x4k"),
             fused=True),
    Workload("chain64k", "grad of elementwise chain, n=65536", _floor_chain("x64k"),
             _chain_grad_cell("x64k"), fused=True),
    Workload("chain1m", "grad of elementwise chain, n=1e6", _floor_chain("x1m"), _chain_grad_cell("x1m"),
             heavy=True, fused=True),
    Workload("deep64", "grad of a 1,000-operation elementwise chain, n=64",
             _floor_chain("x64", deep), _chain_grad_cell("x64", deep)),
    Workload("eager16", "eager x.grad after f(x).backward(), n=16", _floor_chain("x16"), _eager16_cell),
    Workload("mlp", "grad wrt (w1, w2) of 2-layer MLP MSE, batch 64", _floor_mlp, _mlp_cell),
    Workload("jacrev", "jacrev of tanh(W@x+b), 128x128", _floor_layer, _jac_cell("jacrev")),
    Workload("jacfwd", "jacfwd of tanh(W@x+b), 128x128", _floor_layer, _jac_cell("jacfwd")),
    Workload("hessian16", "hessian of chain, n=16", _floor_chain("x16"), _hessian_cell),
    Workload("per_sample_grads", "vmap(grad(loss1)) over batch 64", _floor_batched_loss, _psg_cell),
    Workload("vmap_fwd", "vmap(loss1) forward, batch 64", _floor_batched_loss, _vmap_fwd_cell),
    Workload("vmap_jacfwd", "vmap(jacfwd(chain_vec)), 64 x 16", _floor_vj, _vmap_jacfwd_cell),
    Workload("rk4_scan", "grad of a 10,000-step RK4 scan, 4 states (torch.func: unrolled loop)",
             _floor_rk4, _rk4_cell, heavy=True, settle=1.5),
    Workload("rk4_scan_ckpt", "rk4_scan with checkpoint on every step (jax.checkpoint for JAX)",
             _floor_rk4, _rk4_ckpt_cell, heavy=True, settle=1.5),
]
WORKLOAD_NAMES = [w.name for w in WORKLOADS]


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------


def measure(run, min_time, repeats, max_calls=1_000_000):
    """Median over ``repeats`` measurements of the per-call time in us; each
    measurement loops ``n`` calls, ``n`` chosen so it lasts >= min_time."""
    n = calibrate(run, min_time, max_calls)
    samples = [sample(run, n) for _ in range(repeats)]
    return statistics.median(samples) * 1e6, n


# The clock of the samples: wall time, or with --cpu-time this process's CPU time (on a shared,
# busy machine the time the process waits for a core is not counted: steadier ratios).
CLOCK = time.perf_counter


def sample(run, n):
    """Seconds per call of ``run``, over ``n`` calls."""
    t0 = CLOCK()
    for _ in range(n):
        run()
    return (CLOCK() - t0) / n


def calibrate(run, min_time, max_calls=1_000_000):
    """How many calls of ``run`` one measurement loops so that it lasts >= min_time."""
    gc.collect()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            run()
        dt = time.perf_counter() - t0
        if dt >= min_time or n >= max_calls:
            break
        if dt <= 0:
            n *= 10
        else:
            n = min(max_calls, max(n * 2, int(n * 1.2 * min_time / dt) + 1))
    return n


class Cell:
    """Outcome of one (workload, library) pair."""

    def __init__(self, us=None, text=None, detail=None, calls=None, verified=True,
                 first_call=None):
        self.first_call = first_call  # seconds of the first call (tracing, compiling)
        self.us = us
        self.text = text  # "n/a", "error: ...", "MISMATCH", "-"
        self.detail = detail
        self.calls = calls
        self.verified = verified


def short_exc(exc, limit=60):
    msg = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


def compute_reference(w, data, verbose):
    """(library, result) of the first reference library that works."""
    for lib in REFERENCE_ORDER:
        if lib in IMPORT_NOTES:
            continue
        try:
            res = w.cells(lib, data)()
            to_numpy_tree(res)
            return lib, res
        except NotApplicable:
            continue
        except Exception as exc:
            if verbose:
                print(f"  [reference {lib} failed for {w.name}: {short_exc(exc)}]", file=sys.stderr)
            continue
    return None, None


class Prepared:
    """A cell ready to be timed: its callable, calls per measurement and how many to take."""

    def __init__(self, run, n, repeats, verified, first_call=None):
        self.run, self.n, self.repeats, self.verified = run, n, repeats, verified
        self.first_call = first_call
        self.samples = []


# A cell whose first call takes longer than this many seconds is measured by one more call (the
# unrolled 10,000-step loops take minutes per call; their ratios are not close calls).
SLOW_CALL = 10.0


def prepare_cell(w, lib, data, ref, min_time, repeats, debug):
    """A ``Prepared`` cell (warmed up, checked against the reference, calibrated), or a finished
    ``Cell`` for one that cannot be timed (n/a, error, mismatch)."""
    if lib in ("arrayad.jit-fused", "arrayad.jit-unfused") and not w.fused:
        return Cell(text="n/a", detail=FUSED_NA)
    try:
        if lib == "numpy-fwd":
            run = w.floor(data)
        else:
            run = w.cells(lib, data)
        t0 = time.perf_counter()
        result = run()  # warm-up (and jit compile)
        first_call = time.perf_counter() - t0
        if lib != "numpy-fwd":
            if ref is not None:
                why = results_match(result, ref)
                if why is not None:
                    return Cell(text="MISMATCH", detail=why)
            else:
                to_numpy_tree(result)
        verified = ref is not None or lib == "numpy-fwd"
        if w.settle and lib.startswith("arrayad"):
            settled = time.perf_counter() + w.settle
            while time.perf_counter() < settled:
                run()
        if first_call > SLOW_CALL:  # a call of many seconds: one more call is its measurement
            return Prepared(run, 1, 1, verified=verified, first_call=first_call)
        if first_call > 1.0:  # very slow cell: keep its total time bounded
            repeats = min(repeats, 3)
        else:
            run()
        return Prepared(run, calibrate(run, min_time), repeats,
                        verified=verified, first_call=first_call)
    except NotApplicable as exc:
        return Cell(text="n/a", detail=str(exc))
    except Exception as exc:
        if debug:
            traceback.print_exc()
        return Cell(text=f"error: {short_exc(exc, 28)}", detail=short_exc(exc, 300))


# ---------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------

LEAK_CALLS = 10_000


def traced_peak_mb(run):
    """Peak of the memory Python's allocator hands out during one call of ``run``, in MB.

    tracemalloc sees NumPy's array buffers (NumPy reports them to it), so it measures arrayad,
    HIPS autograd and the NumPy forward pass alike; torch and JAX allocate outside it."""
    import tracemalloc

    run()  # warm caches first, so that only the call itself is counted
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        run()
        return (tracemalloc.get_traced_memory()[1] - base) / 1e6
    finally:
        tracemalloc.stop()


def growth_over_calls(run, calls):
    """(live objects, traced MB) gained over ``calls`` calls of ``run`` after a warm-up: a leak
    of tape nodes or level frames shows as growth proportional to ``calls``."""
    import tracemalloc

    for _ in range(200):
        run()
    gc.collect()
    tracemalloc.start()
    try:
        objects, mem = len(gc.get_objects()), tracemalloc.get_traced_memory()[0]
        for _ in range(calls):
            run()
        gc.collect()
        return (len(gc.get_objects()) - objects,
                (tracemalloc.get_traced_memory()[0] - mem) / 1e6)
    finally:
        tracemalloc.stop()


def memory_section(data, libs):
    """Peak memory of grad on the 1M chain per library, and the leak check: ``{"peaks": {lib: MB},
    "leaks": [(what, objects gained, traced MB gained)]}``."""
    x = data["x1m"]
    runs = {"numpy-fwd": lambda: chain(np, x)}
    if "arrayad" in libs:
        g = ad.func.grad(bind(chain, AD_NS))
        runs["arrayad"] = lambda: g(x)
    if "arrayad.jit" in libs:
        gj = ad.jit(ad.func.grad(bind(chain, AD_NS)))
        runs["arrayad.jit"] = lambda: gj(x)
    for lib in ("arrayad.jit-unfused", "arrayad.jit-fused"):
        if lib in libs:
            runs[lib] = _fused_run(ad.jit(ad.func.grad(bind(chain, AD_NS))), [x],
                                   lib == "arrayad.jit-fused")
    if "autograd" in libs:
        ga = autograd.grad(bind(chain, anp))
        runs["autograd"] = lambda: ga(x)
    peaks = {lib: traced_peak_mb(run) for lib, run in runs.items()}
    leaks = []
    if "arrayad" in libs:
        x16, X = data["x16"], data["vj_X"]
        g16 = ad.func.grad(bind(chain, AD_NS))
        vg = ad.func.vmap(ad.func.grad(bind(chain, AD_NS)))
        for name, run in [("grad(chain16)", lambda: g16(x16)),
                          ("vmap(grad(chain)) over 64 x 16", lambda: vg(X))]:
            leaks.append((name,) + growth_over_calls(run, LEAK_CALLS))
    return {"peaks": peaks, "leaks": leaks}


def memory_tables(mem):
    peaks = mem["peaks"]
    head = ["measure"] + list(peaks)
    rows = [["peak MB, grad of chain1m (input 8 MB)"] + [f"{v:.1f}" for v in peaks.values()]]
    leak_head = ["arrayad, 10,000 calls of", "objects gained", "traced MB gained"]
    leak_rows = [[name, str(objs), f"{mb:.3f}"] for name, objs, mb in mem["leaks"]]
    return (head, rows), (leak_head, leak_rows)


RK4_MEMORY_STEPS = (1_000, RK4_STEPS)   # the Python loops at the first only (see below)


def rk4_memory_section(data):
    """arrayad's grad of the RK4 workload, for scan and for the Python loop on the tape, each
    without and with checkpoint on every step: ``{steps: {"scan"|"scan_c"|"loop"|"loop_c":
    (seconds of one call, peak traced MB)}}``. The loops run 1,000 steps only: at 10,000 steps
    under tracemalloc they take minutes (their memory grows in proportion to the steps)."""
    th, y0 = data["rk4_th"], data["rk4_y0"]
    step = lambda t, y: _rk4_step(AD_NS, t, y)  # noqa: E731
    cstep = adf.checkpoint(step)

    def scan_loss(t, y, n, ckpt):
        f = lambda c, _: (_rk4_step(AD_NS, t, c), None)  # noqa: E731
        c, _ = adf.scan(adf.checkpoint(f) if ckpt else f, y, None, length=n)
        return AD_NS.sum(c ** 2)

    def loop_loss(t, y, n, ckpt):
        for _ in range(n):
            y = cstep(t, y) if ckpt else step(t, y)
        return AD_NS.sum(y ** 2)
    out = {}
    for n in RK4_MEMORY_STEPS:
        cells = out[n] = {}
        for name, fn, ckpt in [("scan", scan_loss, False), ("scan_c", scan_loss, True),
                               ("loop", loop_loss, False), ("loop_c", loop_loss, True)]:
            if name.startswith("loop") and n > RK4_MEMORY_STEPS[0]:
                continue
            g = adf.grad(lambda t, y: fn(t, y, n, ckpt))
            g(th, y0)
            gc.collect()
            t0 = time.perf_counter()
            g(th, y0)
            cells[name] = (time.perf_counter() - t0, traced_peak_mb(lambda: g(th, y0)))
    return out


def rk4_memory_table(rk4):
    head = ["steps", "measure", "scan", "scan + checkpoint", "ckpt / scan", "Python loop",
            "loop + checkpoint", "ckpt / loop"]
    rows = []
    for n, cells in rk4.items():
        for k, (what, fmt) in enumerate([("time s", "{:.2f}"), ("peak MB", "{:.2f}")]):
            row = [f"{n:,}", what]
            for a, b in [("scan", "scan_c"), ("loop", "loop_c")]:
                if a in cells:
                    row += [fmt.format(cells[a][k]), fmt.format(cells[b][k]),
                            f"{cells[b][k] / cells[a][k]:.2f}x"]
                else:
                    row += ["-", "-", "-"]
            rows.append(row)
    return head, rows


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------


def fmt_us(v):
    if v < 10:
        return f"{v:.2f}"
    if v < 1000:
        return f"{v:.1f}"
    return f"{v:,.0f}"


def cell_ratio(cells, lib, over):
    """``lib``'s time over ``over``'s in one workload's cells; None where either has no time."""
    a, b = cells.get(lib), cells.get(over)
    if a is None or b is None or a.us is None or b.us is None:
        return None
    return a.us / b.us


def ratio_text(r):
    """A ratio as text: two decimals, or two significant digits below 0.1 (0.0069x, not 0.00x);
    "-" for none."""
    if r is None:
        return "-"
    return f"{r:.2f}x" if r >= 0.1 else f"{r:.2g}x"


def cell_text(c):
    if c is None:
        return "-"
    if c.us is not None:
        return fmt_us(c.us) + ("" if c.verified else "*")
    return c.text


RATIO_COLS = [("numpy-fwd", "arrayad / numpy-fwd"), ("torch.func", "arrayad / torch.func"),
              ("jax.jit", "arrayad / jax.jit"), ("autograd", "arrayad / autograd")]
# arrayad.jit's own ratios, and the first call (trace + passes + compile) beside jax.jit's
JIT_RATIO_COLS = [("numpy-fwd", "arrayad.jit / numpy-fwd"), ("jax.jit", "arrayad.jit / jax.jit"),
                  ("arrayad", "arrayad.jit / arrayad"),
                  ("arrayad.jit-unfused", "arrayad.jit / unfused")]


def build_tables(results, workloads, libs):
    head = ["workload"] + libs
    rows = [[w.name] + [cell_text(results[w.name].get(lib)) for lib in libs] for w in workloads]
    ratio_head = ["workload"] + [title for _, title in RATIO_COLS]
    ratio_rows = []
    for w in workloads:
        r = results[w.name]
        ratio_rows.append([w.name] + [ratio_text(cell_ratio(r, "arrayad", lib))
                                      for lib, _ in RATIO_COLS])
    if "arrayad.jit" in libs:
        ratio_head += [title for _, title in JIT_RATIO_COLS] + [
            "first call ms: arrayad.jit", "jax.jit"]
        for w, row in zip(workloads, ratio_rows):
            r = results[w.name]
            row += [ratio_text(cell_ratio(r, "arrayad.jit", lib)) for lib, _ in JIT_RATIO_COLS]
            for lib in ("arrayad.jit", "jax.jit"):
                c = r.get(lib)
                row.append(f"{c.first_call * 1e3:.1f}" if c is not None and c.first_call
                           is not None else "-")
    return (head, rows), (ratio_head, ratio_rows)


def text_table(head, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "  ".join(  # noqa: E731
        str(c).ljust(wd) if i == 0 else str(c).rjust(wd) for i, (c, wd) in enumerate(zip(cells, widths)))
    sep = "  ".join("-" * wd for wd in widths)
    return "\n".join([line(head), sep] + [line(r) for r in rows])


def md_table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join([":---"] + ["---:"] * (len(head) - 1)) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def thread_settings():
    s = {k: os.environ.get(k, "") for k in THREAD_ENV}
    if torch is not None:
        s["torch.get_num_threads()"] = str(torch.get_num_threads())
        s["torch.get_num_interop_threads()"] = str(torch.get_num_interop_threads())
    if jax is not None:
        s["jax_enable_x64"] = str(jax.config.jax_enable_x64)
    return s


# ---------------------------------------------------------------------------
# Goals: each is computed from this run's cells, so the tables of goals on the performance page
# can never quote another run's figures.
# ---------------------------------------------------------------------------


class Measured:
    """What one run measured, for the goals: the timed cells and the extra sections."""

    def __init__(self, results, memory=None, rk4=None, new_process=None):
        self.results, self.memory, self.rk4 = results, memory, rk4
        # {(workload, lib): (ms with an empty kernel cache, ms with the cache it filled)}
        self.new_process = new_process or {}

    def ratio(self, workload, lib, over):
        return cell_ratio(self.results.get(workload, {}), lib, over)

    def first_call_ms(self, workload, lib):
        c = self.results.get(workload, {}).get(lib)
        return c.first_call * 1e3 if c is not None and c.first_call is not None else None


def ratio_goal(text, workload, lib, over, limit):
    """``lib``'s time on ``workload`` over ``over``'s <= ``limit``."""
    def value(m):
        r = m.ratio(workload, lib, over)
        return None if r is None else (ratio_text(r), r, limit)
    return text, value


def first_call_goal(text, workload, lib, limit_ms, beside=None):
    def value(m):
        ms = m.first_call_ms(workload, lib)
        if ms is None:
            return None
        other = m.first_call_ms(workload, beside) if beside else None
        shown = _ms(ms) + (f" ({beside}: {_ms(other)})" if other is not None else "")
        return shown, ms, limit_ms
    return text, value


def _ms(ms):
    return f"{ms / 1e3:.2f} s" if ms >= 1000 else f"{ms:.1f} ms"


def _jit_never_slower(m):
    ratios = [m.ratio(w, "arrayad.jit", "arrayad") for w in m.results]
    ratios = [r for r in ratios if r is not None]
    if not ratios:
        return None
    return f"{min(ratios):.2f}x-{max(ratios):.2f}x", max(ratios), 1.0


def _peak_goal(lib, over):
    def value(m):
        peaks = (m.memory or {}).get("peaks", {})
        if lib not in peaks or over not in peaks:
            return None
        return f"{peaks[lib]:.0f} MB vs {peaks[over]:.0f} MB", peaks[lib], peaks[over]
    return value


def _no_leaks(m):
    leaks = (m.memory or {}).get("leaks")
    if not leaks:
        return None
    objs = max(abs(o) for _, o, _ in leaks)
    mb = max(abs(b) for _, _, b in leaks)
    # (a leaked node or frame per call would be 10,000 objects; a few are the interpreter's caches)
    return (" and ".join(f"{o} objects" for _, o, _ in leaks) + f", {mb:+.3f} MB traced",
            objs, 100)


def new_process_goal(text, workload, lib, cached, limit_ms):
    """The first call of a cell in a new process: with an empty kernel cache, or (``cached``)
    with the cache the first such process filled."""
    def value(m):
        got = m.new_process.get((workload, lib))
        if got is None or got[cached] is None:
            return None
        ms = got[cached][0]
        return _ms(ms), ms, limit_ms
    return text, value


def _rk4_ckpt(k, limit):
    """The Python loop's gradient with checkpoint on every step over without it: time (k=0) or
    peak memory (k=1)."""
    def value(m):
        cells = (m.rk4 or {}).get(RK4_MEMORY_STEPS[0], {})
        if "loop" not in cells:
            return None
        r = cells["loop_c"][k] / cells["loop"][k]
        return ratio_text(r), r, limit
    return value


GOALS = {
    "arrayad": [
        ratio_goal("`grad`, 16-element chain: <= 4x the NumPy forward", "chain16", "arrayad",
                   "numpy-fwd", 4),
        ratio_goal("... and <= 0.2x torch.func", "chain16", "arrayad", "torch.func", 0.2),
        ratio_goal("eager backward, 16 elements: <= 4x the NumPy forward", "eager16", "arrayad",
                   "numpy-fwd", 4),
        ratio_goal("... and <= 0.5x torch's eager backward", "eager16", "arrayad", "torch.func",
                   0.5),
        ratio_goal("`grad`, 1,000,000 elements: <= 1.6x the NumPy forward", "chain1m", "arrayad",
                   "numpy-fwd", 1.6),
        ratio_goal("MLP `grad`: <= 2.5x the NumPy forward", "mlp", "arrayad", "numpy-fwd", 2.5),
        ratio_goal("... and <= 1x torch.func", "mlp", "arrayad", "torch.func", 1),
        ratio_goal("`jacrev`: <= 0.5x torch.func", "jacrev", "arrayad", "torch.func", 0.5),
        ratio_goal("... and <= 1.5x `jax.jit(jax.jacrev)`", "jacrev", "arrayad", "jax.jit", 1.5),
        ratio_goal("`jacfwd`: <= 0.5x torch.func", "jacfwd", "arrayad", "torch.func", 0.5),
        ratio_goal("`hessian`, 16-element chain: <= 0.08x torch.func", "hessian16", "arrayad",
                   "torch.func", 0.08),
        ratio_goal("per-sample gradients: <= 1x torch.func", "per_sample_grads", "arrayad",
                   "torch.func", 1),
        ratio_goal("... and <= 3x the batched NumPy forward", "per_sample_grads", "arrayad",
                   "numpy-fwd", 3),
        ratio_goal("`vmap` forward: <= 1.2x the hand-batched NumPy forward", "vmap_fwd",
                   "arrayad", "numpy-fwd", 1.2),
        ratio_goal("`vmap(jacfwd)`: <= 0.25x torch.func", "vmap_jacfwd", "arrayad", "torch.func",
                   0.25),
        ("peak memory of `grad` on 1M elements <= HIPS autograd's", _peak_goal("arrayad",
                                                                             "autograd")),
        ("10,000 calls of `grad` and `vmap(grad)` leak nothing", _no_leaks),
    ],
    "jit": [
        ratio_goal("`jit(grad)`, 16-element chain / NumPy forward: <= 2x", "chain16",
                   "arrayad.jit", "numpy-fwd", 2),
        ratio_goal("`jit(hessian)`, 16-element chain / `jax.jit`: <= 1x", "hessian16",
                   "arrayad.jit", "jax.jit", 1),
        ratio_goal("`jit(vmap(jacfwd))` / `jax.jit`: <= 1.5x", "vmap_jacfwd", "arrayad.jit",
                   "jax.jit", 1.5),
        ratio_goal("`jit(jacrev)`, 128 / `jax.jit`: <= 1x", "jacrev", "arrayad.jit", "jax.jit", 1),
        ratio_goal("`jit(jacfwd)`, 128 / `jax.jit`: <= 1x", "jacfwd", "arrayad.jit", "jax.jit", 1),
        ratio_goal("`jit(grad)` of the MLP / `jax.jit`: <= 1.1x", "mlp", "arrayad.jit", "jax.jit",
                   1.1),
        ratio_goal("`jit(grad)`, 10^6-element chain / NumPy forward: <= 1x", "chain1m",
                   "arrayad.jit", "numpy-fwd", 1),
        first_call_goal("first call of `jit(grad(chain16))` (trace, passes, compilation, one "
                        "run): <= 10 ms", "chain16", "arrayad.jit", 10, beside="jax.jit"),
        ("jitted never slower than un-jitted (`arrayad.jit / arrayad`, every workload)",
         _jit_never_slower),
    ],
    # (fusion as users get it: the tiled replay, on by default; the opt-in numba loops are the
    # fusion table's column)
    "fusion": [
        ratio_goal("`jit(grad)` with fusion, 10^6-element chain / NumPy forward: <= 0.4x",
                   "chain1m", "arrayad.jit", "numpy-fwd", 0.4),
        ratio_goal("... at 65,536 elements / `jax.jit`: <= 1.2x", "chain64k",
                   "arrayad.jit", "jax.jit", 1.2),
        ratio_goal("... at 4,096 elements / `jax.jit`: <= 1x", "chain4k", "arrayad.jit",
                   "jax.jit", 1),
        ratio_goal("`jit(grad)` of a 1,000-operation chain on 64 elements (`deep64`) / `jax.jit`: "
                   "<= 1x", "deep64", "arrayad.jit", "jax.jit", 1),
        new_process_goal("first call of `jit(grad(chain))` with fusion, 65,536 elements, in a "
                         "new process (trace, passes, tiling, one run): <= 300 ms",
                         "chain64k", "arrayad.jit", False, 300),
        new_process_goal("... in another new process (the tiled replay compiles nothing, so it "
                         "has no cache to find): <= 10 ms", "chain64k", "arrayad.jit", True, 10),
        ("peak memory of `jit(grad)` on the 10^6 chain, fused <= unfused",
         _peak_goal("arrayad.jit", "arrayad.jit-unfused")),
    ],
    "control flow": [
        ratio_goal("`jit(grad)` of the 10,000-step RK4 `scan` / `jax.jit(jax.grad)` of "
                   "`lax.scan`: <= 2x", "rk4_scan", "arrayad.jit", "jax.jit", 2),
        ratio_goal("`grad` of the RK4 `scan` / torch.func's unrolled loop: <= 1x", "rk4_scan",
                   "arrayad", "torch.func", 1),
        new_process_goal("first call of `jit(grad)` of the RK4 `scan` in a new process (trace, "
                         "lowering the loops to the register machine, one run): <= 0.5 s",
                         "rk4_scan", "arrayad.jit", False, 500),
        ("peak memory of the Python loop's `grad` with `checkpoint` on every step / without: "
         "<= 0.25x", _rk4_ckpt(1, 0.25)),
        ("... and its time: <= 2.5x", _rk4_ckpt(0, 2.5)),
    ],
}


def goal_tables(measured):
    """{section: (head, rows)} of the goals this run measured: the value and whether it is met
    ("at the edge": missed by less than 5%)."""
    out = {}
    for section, goals in GOALS.items():
        rows = []
        for text, value in goals:
            v = value(measured)
            if v is None:
                continue
            shown, got, limit = v
            met = "yes" if got <= limit else "no (at the edge)" if got <= 1.05 * limit else "no"
            rows.append([text, shown, met])
        if rows:
            out[section] = (["goal", "this run", "met?"], rows)
    return out


FUSION_COLUMNS = [("arrayad.jit-unfused", "unfused replay"), ("arrayad.jit", "tiled (default)"),
                  ("arrayad.jit-fused", "numba loops (from 32,768 elements)"),
                  ("jax.jit", "jax.jit")]


def fusion_table(measured):
    """``jit(grad)`` of the chain over the NumPy forward: unfused, tiled (the default), the
    numba loops and ``jax.jit``; a last row with the first calls in new processes."""
    rows = []
    for w, n in [("chain4k", "4,096"), ("chain64k", "65,536"), ("chain1m", "1,000,000")]:
        cells = [measured.ratio(w, lib, "numpy-fwd") for lib, _ in FUSION_COLUMNS]
        if cells[0] is None:
            continue
        rows.append([n] + [ratio_text(r) for r in cells])
    if rows:
        firsts, steady = [], []
        for lib, _ in FUSION_COLUMNS:
            got = [g for g in measured.new_process.get(("chain64k", lib), ()) if g is not None]
            firsts.append(" / ".join(_ms(g[0]) for g in got) or "-")
            steady.append(_ms(got[0][1]) if got else "-")
        rows.append(["65,536 in a new process: first call (empty / filled kernel cache)"]
                    + firsts)
        rows.append(["... its next calls (median)"] + steady)
    return ["n"] + [title for _, title in FUSION_COLUMNS], rows


# The cells whose first call in a new process the goals and the fusion table ask for (compilers:
# numba's import, the kernels' compilation, their on-disk cache).
NEW_PROCESS_CELLS = [("chain64k", "arrayad.jit-unfused"), ("chain64k", "arrayad.jit"),
                     ("chain64k", "arrayad.jit-fused"), ("rk4_scan", "arrayad.jit")]


def first_call_in_new_process(workload, lib, cache_dir):
    """(Milliseconds of the first call of a cell in a new Python process whose kernel cache is
    ``cache_dir`` (the process's imports and data are done before the clock starts), the median
    CPU milliseconds of its next calls there), or None."""
    import subprocess

    env = dict(os.environ, ARRAYAD_CACHE_DIR=cache_dir)
    try:
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--first-call",
                              f"{workload}:{lib}"], env=env, capture_output=True, text=True,
                             timeout=900, check=True)
        first, steady = out.stdout.split()[-2:]
        return float(first) * 1e3, float(steady) * 1e3
    except Exception as exc:
        print(f"[first call of {workload}/{lib} in a new process] failed: "
              f"{short_exc(exc, 200)}", file=sys.stderr)
        return None


def first_call_here(spec):
    """``--first-call workload:lib``: time that cell's first call in this process, then its next
    calls (CPU time, for about a second); print seconds: the first call, the median of the next."""
    name, lib = spec.split(":")
    w = next(w for w in WORKLOADS if w.name == name)
    run = w.cells(lib, make_data())
    t0 = time.perf_counter()
    run()
    first = time.perf_counter() - t0
    times = []
    while sum(times) < 1.0 and len(times) < 1000:
        t0 = time.process_time()
        run()
        times.append(time.process_time() - t0)
    print(first, statistics.median(times))
    return 0


def notes_lines(results, workloads, libs, skipped_libs, ref_libs):
    notes = []
    for lib in skipped_libs:
        notes.append(f"{lib}: skipped, {IMPORT_NOTES[lib]}")
    for w in workloads:
        r = results[w.name]
        for lib in libs:
            c = r.get(lib)
            if c is not None and c.us is None and c.detail and c.detail != FUSED_NA:
                notes.append(f"{w.name} / {lib}: {c.text.split(':')[0]} - {c.detail}")
    if "arrayad.jit-unfused" in libs:
        notes.append("arrayad.jit-unfused: `arrayad.jit` without fusion (`ad.config.jit_tiles` "
                     f"off): one NumPy call per operation on the whole arrays; {FUSED_NA}")
    if "arrayad.jit-fused" in libs:
        notes.append("arrayad.jit-fused: `arrayad.jit` with numba's loops for NumPy programs "
                     "(`ad.config.jit_fuse` on and `lower_numba.register()`, not the tiled "
                     "replay), compiled at the first call, its kernels in a new on-disk cache; unfused "
                     f"below numba's 32,768 elements; {FUSED_NA}")
    unverified = [w.name for w in workloads if ref_libs.get(w.name) is None]
    if unverified:
        notes.append("* = not verified, no reference result for: " + ", ".join(unverified))
    return notes


def markdown_parts(tables, notes, args, ref_libs, memory=None, rk4=None, goals=None,
                   fusion=None):
    """The run as Markdown, in named parts: "" (the run: its settings, times, ratios, memory,
    notes), "goals <section>", "fusion", "rk4 memory"."""
    (head, rows), (rhead, rrows) = tables
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    stamp = f"From the benchmark run of {now} (single thread; its settings are given with it)."
    lines = [
        "# arrayad side-by-side benchmark",
        "",
        f"Date: {now}  ",
        f"Machine: {platform.platform()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} logical CPUs  ",
        f"Command: `python {' '.join(sys.argv)}`  ",
        f"Mode: {'quick' if args.quick else 'full'} (min {args.min_time:g} s per measurement, "
        f"median of {args.repeats}, the libraries' measurements taking turns)",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in VERSIONS.items()),
        "",
        "Thread settings: " + ", ".join(f"`{k}={v}`" for k, v in thread_settings().items()),
        "",
        "Correctness reference per workload: "
        + ", ".join(f"{w}: {lib or 'none'}" for w, lib in ref_libs.items()),
        "",
        "## Time per call (microseconds, float64, single thread)",
        "",
        "`numpy-fwd` is the plain NumPy forward pass of the same function (the floor). "
        "For `eager16` the torch.func column is plain torch autograd (eager).",
        "",
        md_table(head, rows),
        "",
        "## Ratios (lower is better for arrayad)",
        "",
        md_table(rhead, rrows),
        "",
    ]
    if memory is not None:
        (mhead, mrows), (lhead, lrows) = memory_tables(memory)
        lines += ["## Memory", "",
                  "Peak of the memory traced by `tracemalloc` during one call (NumPy reports its "
                  "buffers to it; torch and JAX allocate outside it, so they have no column).", "",
                  md_table(mhead, mrows), ""]
        if lrows:
            lines += ["Growth over 10,000 calls after a warm-up of 200 (a leaked tape node or "
                      "level frame per call would show as thousands of objects):", "",
                      md_table(lhead, lrows), ""]
    if notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    parts = {"": "\n".join(lines)}
    for section, table in (goals or {}).items():
        parts[f"goals {section}"] = "\n".join([stamp, "", md_table(*table), ""])
    if fusion is not None and fusion[1]:
        parts["fusion"] = "\n".join([
            stamp + " `jit(grad)` of the chain relative to NumPy's forward pass of the same "
            "work (medians); the numba column compiled its loops at the first call; the last row "
            "times the first call of each in a new process:", "",
            md_table(*fusion), ""])
    if rk4 is not None:
        parts["rk4 memory"] = "\n".join([
            stamp + " arrayad's `grad` of the `rk4_scan` workload: peak traced memory and "
            "time of one call (wall clock), for `scan` and for the Python loop on the tape, each "
            "without and with `checkpoint` on every step. The loops run 1,000 steps only (their "
            "memory grows in proportion to the steps).", "",
            md_table(*rk4_memory_table(rk4)), ""])
    return parts


BEGIN, END = "<!-- BEGIN GENERATED BY benchmarks/compare.py", "<!-- END GENERATED -->"


def write_markdown(path, parts):
    """Write the run to ``path``. A page with markers keeps its hand-written parts: the block
    after ``<!-- BEGIN GENERATED BY benchmarks/compare.py -->`` is replaced by the run, the one
    after ``<!-- BEGIN GENERATED BY benchmarks/compare.py: goals jit -->`` by that part, and so
    on (docs/performance.md is regenerated this way); any other file gets the whole run."""
    old = open(path).read() if os.path.exists(path) else ""
    if BEGIN not in old:
        text = parts[""] + "".join(f"\n## {name}\n\n{part}" for name, part in parts.items()
                                   if name)
    else:
        text, pos = "", 0
        while True:
            i = old.find(BEGIN, pos)
            if i < 0:
                break
            j = old.index("-->", i) + 3
            k = old.index(END, j)
            name = old[i + len(BEGIN):j - 3].strip().lstrip(":").strip()
            part = parts.get(name)
            if part is None:
                print(f"warning: {path}: the block {name or 'of the run'!r} is not in this run "
                      "and stays as it was", file=sys.stderr)
                part = old[j:k].strip("\n")
            elif not name:
                part = part.replace("# arrayad side-by-side", "## arrayad side-by-side", 1)
                part = part.replace("\n## ", "\n### ")
            text += old[pos:j] + "\n" + part.rstrip("\n") + "\n"
            pos = k
        text += old[pos:]
    with open(path, "w") as fh:
        fh.write(text)


def write_plot(path, results, workloads, libs):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"numpy-fwd": "#7f7f7f", "arrayad": "#d62728", "arrayad.jit": "#8c564b",
              "torch.func": "#ff7f0e",
              "autograd": "#2ca02c", "jax": "#1f77b4", "jax.jit": "#17becf", "mygrad": "#9467bd"}
    nlib = len(libs)
    width = 0.8 / max(nlib, 1)
    fig, ax = plt.subplots(figsize=(max(8, 1.3 * len(workloads) + 2), 5.5))
    xs = np.arange(len(workloads))
    for j, lib in enumerate(libs):
        vals, pos = [], []
        for i, w in enumerate(workloads):
            c = results[w.name].get(lib)
            if c is not None and c.us is not None:
                vals.append(c.us)
                pos.append(xs[i] - 0.4 + width * (j + 0.5))
        ax.bar(pos, vals, width, label=lib, color=colors.get(lib))
    ax.set_yscale("log")
    ax.set_xticks(xs)
    ax.set_xticklabels([w.name for w in workloads], rotation=30, ha="right")
    ax.set_ylabel("microseconds per call (log scale)")
    ax.set_title("arrayad vs peers, float64, single thread (lower is better)")
    ax.grid(axis="y", which="major", alpha=0.3)
    ax.legend(ncol=min(nlib, 4), fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer/shorter measurements (smoke run)")
    p.add_argument("--only", default=None, help="comma-separated workloads (default: all): "
                   + ",".join(WORKLOAD_NAMES + ["memory", "rk4_memory"]))
    p.add_argument("--libs", default=None,
                   help="comma-separated libraries (default: all installed): numpy,arrayad,torch,autograd,jax,jax.jit,mygrad")
    p.add_argument("--markdown", metavar="PATH", help="write the tables as Markdown to PATH")
    p.add_argument("--plot", metavar="PATH", help="write a PNG bar chart to PATH")
    p.add_argument("--min-time", type=float, default=None,
                   help="seconds per measurement (default 0.2, --quick 0.05)")
    p.add_argument("--repeats", type=int, default=None, help="measurements per cell (default 7, --quick 3)")
    p.add_argument("--debug", action="store_true", help="print tracebacks of failing cells")
    p.add_argument("--first-call", metavar="WORKLOAD:LIB", help=argparse.SUPPRESS)
    p.add_argument("--cpu-time", action="store_true",
                   help="time the samples by this process's CPU time, not wall time (steadier on "
                        "a busy machine; single-threaded runs only)")
    args = p.parse_args(argv)
    if args.min_time is None:
        args.min_time = 0.05 if args.quick else 0.2
    if args.repeats is None:
        args.repeats = 3 if args.quick else 7
    return args


def main(argv=None):
    global CLOCK
    args = parse_args(argv)
    if args.first_call:
        return first_call_here(args.first_call)
    if args.cpu_time:
        CLOCK = time.process_time

    if args.only:
        names = [s.strip() for s in args.only.split(",") if s.strip()]
        bad = [n for n in names if n not in WORKLOAD_NAMES + ["memory", "rk4_memory"]]
        if bad:
            sys.exit(f"unknown workload(s): {', '.join(bad)}; choose from {', '.join(WORKLOAD_NAMES)}")
        workloads = [w for w in WORKLOADS if w.name in names]
        with_memory = "memory" in names
        with_rk4_memory = "rk4_memory" in names
    else:
        workloads = list(WORKLOADS)
        with_memory = with_rk4_memory = True

    if args.libs:
        wanted = []
        for s in args.libs.split(","):
            s = s.strip().lower()
            if not s:
                continue
            if s not in LIB_ALIASES:
                sys.exit(f"unknown library {s!r}; choose from {', '.join(sorted(set(LIB_ALIASES)))}")
            wanted.append(LIB_ALIASES[s])
        requested = [lib for lib in ALL_LIBS if lib in wanted]
    else:
        requested = list(ALL_LIBS)
    # mygrad is optional and only has an eager16 cell: silent if not installed
    skipped = [lib for lib in requested if lib in IMPORT_NOTES and not (lib == "mygrad" and not args.libs)]
    libs = [lib for lib in requested if lib not in IMPORT_NOTES]
    if "mygrad" in libs and not any(w.name == "eager16" for w in workloads):
        libs.remove("mygrad")

    print("arrayad benchmark: " + ", ".join(f"{k} {v}" for k, v in VERSIONS.items()))
    print("threads: " + ", ".join(f"{k}={v}" for k, v in thread_settings().items()))
    for lib in skipped:
        print(f"note: skipping {lib}: {IMPORT_NOTES[lib]}")
    print(f"mode: {'quick' if args.quick else 'full'}, >= {args.min_time:g} s per measurement, "
          f"median of {args.repeats}", flush=True)

    if "arrayad.jit-fused" in libs and "ARRAYAD_CACHE_DIR" not in os.environ:
        # (a new cache: the fused first calls count numba's compilation, not an earlier run's)
        os.environ["ARRAYAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="arrayad-bench-kernels-")
        ad.config.update("cache_dir", os.environ["ARRAYAD_CACHE_DIR"])   # (imported already)

    data = make_data()
    # The peers' modules (torch, jax) put hundreds of MB of Python objects in this process: a
    # full collection that a workload's garbage triggers would walk all of them, and land in
    # whichever library's measurement happens to be running (a 1,000-operation gradient doubled
    # in some processes and not in others). Frozen, they are left out of every collection; each
    # library's own garbage is still collected as it would be in a program of its own.
    gc.collect()
    gc.freeze()
    results = {}
    ref_libs = {}
    t_start = time.perf_counter()
    for w in workloads:
        repeats = min(args.repeats, 3 if args.quick else 5) if w.heavy else args.repeats
        ref_lib, ref = compute_reference(w, data, args.debug)
        ref_libs[w.name] = ref_lib
        print(f"[{w.name}] {w.desc} (reference: {ref_lib or 'none'})", file=sys.stderr, flush=True)
        results[w.name] = {}
        prepared = {}
        for lib in libs:
            c = prepare_cell(w, lib, data, ref, args.min_time, repeats, args.debug)
            if isinstance(c, Prepared):
                prepared[lib] = c
            else:
                results[w.name][lib] = c
        # The measurements of the libraries take turns, so that a burst of load on this shared
        # machine lands on all of them rather than on one cell: the ratios stay comparable.
        for r in range(max([p.repeats for p in prepared.values()], default=0)):
            for lib, p in prepared.items():
                if r < p.repeats:
                    p.samples.append(sample(p.run, p.n))
        for lib in libs:
            p = prepared.get(lib)
            if p is not None:
                results[w.name][lib] = Cell(us=statistics.median(p.samples) * 1e6, calls=p.n,
                                            verified=p.verified, first_call=p.first_call)
            c = results[w.name][lib]
            extra = f" ({c.calls} calls/measurement)" if c.calls else (f" ({c.detail})" if c.detail else "")
            print(f"    {lib:<11} {cell_text(c):>14}{extra}", file=sys.stderr, flush=True)
        del ref, prepared
    handwritten = None
    if any(w.name == "per_sample_grads" for w in workloads):
        psg = results["per_sample_grads"]
        handwritten = measure(handwritten_per_sample_grads(data), args.min_time, args.repeats)[0]
        for lib in ("numpy-fwd", "arrayad"):
            c = psg.get(lib)
            if c is not None and c.us is not None:
                print(f"per_sample_grads: {lib} / hand-written NumPy = {c.us / handwritten:.2f}x",
                      file=sys.stderr)
    memory = None
    if with_memory:
        print("[memory] peak of grad on chain1m; growth over 10,000 calls", file=sys.stderr,
              flush=True)
        memory = memory_section(data, libs)
    rk4_memory = None
    if with_rk4_memory and "arrayad" in libs:
        print("[rk4_memory] grad of rk4_scan with and without checkpoint", file=sys.stderr,
              flush=True)
        rk4_memory = rk4_memory_section(data)
    new_process = {}
    for key in NEW_PROCESS_CELLS:
        c = results.get(key[0], {}).get(key[1])
        if c is not None and c.us is not None:
            print(f"[first call in a new process] {key[0]} / {key[1]}", file=sys.stderr,
                  flush=True)
            cache = tempfile.mkdtemp(prefix="arrayad-bench-kernels-")
            new_process[key] = (first_call_in_new_process(*key, cache),
                                first_call_in_new_process(*key, cache))
    elapsed = time.perf_counter() - t_start
    measured = Measured(results, memory, rk4_memory, new_process)
    goals = goal_tables(measured)
    fusion = fusion_table(measured)

    tables = build_tables(results, workloads, libs)
    notes = notes_lines(results, workloads, libs, skipped, ref_libs)
    if handwritten is not None:
        a = results["per_sample_grads"].get("arrayad")
        notes.append(f"per_sample_grads: the same gradients written by hand in NumPy (outer "
                     f"products) take {fmt_us(handwritten)} us"
                     + (f"; arrayad / hand-written = {a.us / handwritten:.2f}x"
                        if a is not None and a.us is not None else ""))
    print()
    print("Time per call, microseconds (float64, 1 thread; numpy-fwd = plain NumPy forward = floor;")
    print("eager16's torch.func column is plain torch autograd)")
    print(text_table(*tables[0]))
    print()
    if "arrayad" in libs:
        print("Ratios (arrayad time / peer time; < 1 means arrayad is faster)")
    else:
        print("Ratios: arrayad not available, nothing to compare")
    print(text_table(*tables[1]))
    if memory is not None:
        print()
        print("Memory (tracemalloc peak of one call, MB)")
        mem_tables = memory_tables(memory)
        print(text_table(*mem_tables[0]))
        if mem_tables[1][1]:
            print(text_table(*mem_tables[1]))
    if rk4_memory is not None:
        print()
        print("RK4 gradient, arrayad: peak traced MB and time of one call, with and without "
              "checkpoint on every step")
        print(text_table(*rk4_memory_table(rk4_memory)))
    if fusion[1]:
        print()
        print("jit(grad) of the chain / NumPy forward, unfused and fused")
        print(text_table(*fusion))
    for section, table in goals.items():
        print()
        print(f"Goals: {section}")
        print(text_table(*table))
    if notes:
        print()
        print("Notes:")
        for n in notes:
            print("  - " + n)
    print(f"\ntotal benchmark time: {elapsed:.1f} s")

    if args.markdown:
        write_markdown(args.markdown, markdown_parts(tables, notes, args, ref_libs, memory,
                                                     rk4_memory, goals, fusion))
        print(f"wrote {args.markdown}")
    if args.plot:
        try:
            write_plot(args.plot, results, workloads, libs)
            print(f"wrote {args.plot}")
        except Exception as exc:
            print(f"plot failed: {short_exc(exc, 200)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
