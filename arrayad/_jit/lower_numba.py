"""numba's loops for fused groups (NOTE [fusion]): one loop per group, run on the blocks of
Dask programs (``lower_dask.py``); on NumPy programs only where ``register()`` asks for them
(the tiled replay, ``lower_tiles.py``, is faster there).

Each fused group becomes the source of one ``numba.njit`` function looping over the elements
(one pass over the data instead of one per operation, no intermediate arrays), written to a
file under the cache directory so that numba's on-disk cache (``cache=True``) keeps the compiled
machine code between processes: the file's name is the hash of its source, so the same group
finds its kernel again. Arithmetic stays in the group's dtype (float32 stays float32: each
literal is converted to it), IEEE semantics (no fastmath; ``error_model="numpy"``: 1/0 is inf,
log(-1) nan, as NumPy, without NumPy's warnings). The transcendental functions are LLVM's/libm's
rather than NumPy's own loops, so they may differ from the unfused result by an ulp.

Fusion pays where the arrays are large: below ``MIN_ELEMENTS`` the replay's one NumPy call per
operation is as fast (its arrays stay in the caches, and NumPy's loops are vectorised where the
fused loop, calling the C library's transcendental functions, is not) and needs no compiler, so
smaller instructions are left to it. Measured single-threaded (CPU time) on the 13-operation
chain's gradient: fused 1.25x slower at 16,384 elements, 1.4-1.6x faster at 32,768, 1.2-1.3x
at 65,536 and 10^6.
"""

import hashlib
import importlib.util
import os
import sys

import numpy as np

from .. import config as _config
from .fusion import _writable, fuse_elementwise, fusible, register_lowerer

# (scalar spellings of the elementwise primitives numba compiles, by xp_name)
_BINARY = {"add": "({0} + {1})", "subtract": "({0} - {1})", "multiply": "({0} * {1})",
           "divide": "({0} / {1})", "pow": "({0} ** {1})", "atan2": "np.arctan2({0}, {1})",
           "hypot": "np.hypot({0}, {1})"}
_UNARY = {"negative": "(-{0})", "positive": "(+{0})", "square": "({0} * {0})",
          "abs": "abs({0})", "sqrt": "np.sqrt({0})", "exp": "np.exp({0})",
          "expm1": "np.expm1({0})", "log": "np.log({0})", "log1p": "np.log1p({0})",
          "log2": "np.log2({0})", "log10": "np.log10({0})", "sin": "np.sin({0})",
          "cos": "np.cos({0})", "tan": "np.tan({0})", "asin": "np.arcsin({0})",
          "acos": "np.arccos({0})", "atan": "np.arctan({0})", "sinh": "np.sinh({0})",
          "cosh": "np.cosh({0})", "tanh": "np.tanh({0})", "asinh": "np.arcsinh({0})",
          "acosh": "np.arccosh({0})", "atanh": "np.arctanh({0})"}

# Fused only from this many elements of a result on (see the module's docstring).
MIN_ELEMENTS = 32768

_FLOATS = ("float32", "float64")


def available():
    return importlib.util.find_spec("numba") is not None


def _size(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def compilable(e):
    """Whether numba's loop can compute ``e``: a known float operation of one dtype, on
    operands of the result's shape or 0-d, whatever its size (the Dask lowerer's test)."""
    out = e.outs[0]
    name = e.prim.xp_name or e.prim.name
    if name not in (_BINARY if len(e.ins) == 2 else _UNARY if len(e.ins) == 1 else ()):
        return False
    if getattr(out.dtype, "name", None) not in _FLOATS:
        return False
    for a in e.ins:
        if hasattr(a, "shape"):
            if a.dtype != out.dtype or a.shape not in (out.shape, ()):
                return False
        elif type(a.value) not in (int, float):
            return False
    return True


def accept(e):
    """Whether the numba lowerer compiles ``e``: ``compilable``, with a large enough result."""
    return _size(e.outs[0].shape) >= MIN_ELEMENTS and compilable(e)


def _source(sub, fname, scalar=None):
    """The numba source of the sub-program ``sub``: ``fname(n, a0, ..., o0, ...)`` over flat
    arrays (a 0-d input as an array of one element; ``scalar``: which inputs are given so, by
    default the 0-d ones)."""
    dt = sub.outs[0].dtype.name
    names = {}
    head, body = [], []
    params = []
    if scalar is None:
        scalar = [v.shape == () for v in sub.in_vars]
    for i, (v, one) in enumerate(zip(sub.in_vars, scalar)):
        params.append(f"a{i}")
        if one:
            head.append(f"    s{i} = a{i}[0]")
            names[v] = f"s{i}"
        else:
            names[v] = f"x{i}"
            body.append(f"        x{i} = a{i}[i]")

    def atom(a):
        if hasattr(a, "shape"):
            return names[a]
        return f"np.{dt}({float(a.value)!r})"   # (in the group's dtype: float32 stays float32)

    for e in sub.eqns:
        name = e.prim.xp_name or e.prim.name
        table = _BINARY if len(e.ins) == 2 else _UNARY
        v = e.outs[0]
        names[v] = f"t{v.n}"
        body.append(f"        t{v.n} = {table[name].format(*(atom(a) for a in e.ins))}")
    for j, v in enumerate(sub.outs):
        params.append(f"o{j}")
        body.append(f"        o{j}[i] = {names[v]}")
    # (the signature given: compiled when the program is lowered, at its first call, not at
    # the first replay; every array argument flat and C-contiguous; the inputs read-only, so
    # that read-only arrays are taken as they are: a broadcast view, a block of a Dask array
    # made from a NumPy one; writable ones convert to that type)
    n_in = len(sub.in_vars)
    sig = "void(intp, {})".format(", ".join(
        [f"Array({dt}, 1, 'C', readonly=True)"] * n_in + [dt + "[::1]"] * (len(params) - n_in)))
    lines = ["import numpy as np", "import numba", "",
             "", f"@numba.njit({sig!r}, cache=True, error_model='numpy', nogil=True)",
             f"def {fname}(n, {', '.join(params)}):"] + head + [
                 "    for i in range(n):"] + body + [""]
    return "\n".join(lines)


def cache_dir():
    """Where the generated kernels and numba's cache of them live: under
    ``arrayad.config.cache_dir`` (``ARRAYAD_CACHE_DIR``), else ``$XDG_CACHE_HOME/arrayad`` or
    ``~/.cache/arrayad``."""
    d = _config.read("cache_dir")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                ".cache")
        d = os.path.join(base, "arrayad")
    return os.path.join(d, "numba")


_KERNELS = {}   # source hash -> compiled function (this process)


def on_disk(src):
    """Whether the njit function of ``src`` is compiled already: in this process, or in
    numba's on-disk cache (its index file, written by an earlier process's ``_load``), where
    loading it costs milliseconds instead of the compiler's second."""
    key = hashlib.sha1(src.encode()).hexdigest()[:20]
    if key in _KERNELS:
        return True
    try:
        names = os.listdir(os.path.join(cache_dir(), "__pycache__"))
    except OSError:
        return False
    return any(n.startswith(f"k_{key}.") and n.endswith(".nbi") for n in names)


def _load(src):
    """The njit function of ``src``, from a file named by its hash (numba's on-disk cache needs
    a file; kept unchanged once written, as the cache checks its time stamp)."""
    key = hashlib.sha1(src.encode()).hexdigest()[:20]
    fn = _KERNELS.get(key)
    if fn is not None:
        return fn
    fname = f"k_{key}"
    src = src.replace("def kernel(", f"def {fname}(")
    d = cache_dir()
    path = os.path.join(d, fname + ".py")
    try:
        if not os.path.exists(path):
            os.makedirs(d, exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(src)
            os.replace(tmp, path)   # (atomic: another process may write the same file)
        # (a module numba finds by name in sys.modules: its cache pickles the name)
        modname = f"arrayad_numba_{fname}"
        spec = importlib.util.spec_from_file_location(modname, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod
        spec.loader.exec_module(mod)
        fn = getattr(mod, fname)
    except OSError:   # (no writable cache directory: compiled in memory, every process)
        ns = {}
        exec(compile(src.replace("cache=True", "cache=False"), f"<arrayad kernel {fname}>",
                     "exec"), ns)
        fn = ns[fname]
    _KERNELS[key] = fn
    return fn


def make_kernel(sub):
    """(kernel, out_kernel) of a fused group: ``kernel(*raw)`` the tuple of its outputs;
    ``out_kernel(*raw, out=buffers)`` writing into the given ones (``FusedPrimitive``)."""
    fn = _load(_source(sub, "kernel"))
    shape = tuple(sub.outs[0].shape)
    dtype = np.dtype(sub.outs[0].dtype.name)
    n = _size(shape)
    n_out = len(sub.outs)
    flat = [v.shape != () for v in sub.in_vars]

    def args(raw):
        return [np.ravel(a) if f else np.reshape(a, (1,)) for a, f in zip(raw, flat)]

    def kernel(*raw):
        outs = [np.empty(shape, dtype) for _ in range(n_out)]
        fn(n, *args(raw), *(o.reshape(-1) for o in outs))
        return tuple(outs)

    def out_kernel(*raw, out):
        outs = tuple(o if _writable(o) else np.empty(shape, dtype) for o in out)
        fn(n, *args(raw), *(o.reshape(-1) for o in outs))
        return outs

    kernel.tier = "numba loop"
    return kernel, out_kernel


def wanted(prog):
    """Whether ``lower`` would fuse something of ``prog`` (numba installed, two instructions it
    compiles)."""
    return sum(1 for e in prog.eqns if fusible(e) and accept(e)) > 1 and available()


def lower(prog):
    """The fused program of ``prog`` with numba kernels (NOTE [fusion]), or None."""
    if not wanted(prog):
        return None   # (nothing to fuse: numba is not even imported)
    return fuse_elementwise(prog, accept, make_kernel)


def register():
    """Make numba's loops the compiled fusion of NumPy programs (with ``config.jit_fuse``). Not
    done by default: measured slower than the tiled replay (NOTE [tiled replay]), which NumPy
    programs keep; for comparisons (``benchmarks/compare.py``) and tests."""
    register_lowerer("numpy", lower, wanted)
