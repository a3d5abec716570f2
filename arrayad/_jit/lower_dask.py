"""The Dask lowerer of fused groups (NOTE [fusion]): one task per chunk per group.

An unfused Dask program's replay builds one Dask layer per instruction, so its graph has one
task per chunk per elementwise operation (the gradient of the 13-operation chain: ~30 tasks per
chunk), and Dask's scheduler spends a fixed cost on each task (of the order of 100 us to 1 ms,
whatever the chunk's size) and holds each intermediate chunk in memory until its readers have
run. Here each fused group becomes one ``blockwise`` layer whose function runs the whole group
on NumPy blocks (``_ChunkKernel``): the numba loop of the NumPy lowerer where numba is installed
and the group is one it compiles, else the group's unfused NumPy replay as one Python function.

Dask programs are fused whatever their size (no ``MIN_ELEMENTS``): what fusion saves here is the
scheduler's work per task and the intermediate chunks, which a small array pays as much as a
large one; the per-block choice between the numba loop and the NumPy replay still looks at the
block's size, as the NumPy lowerer does. They are lowered when they are staged, not after
``config.jit_fuse_after`` seconds of replays (NOTE [when to compile]): a Dask replay only builds
a graph, so its time says nothing of the work that the fused graph saves.

Chunks. The layer is made as ``dask.array.elemwise`` makes its own: each input indexed by its
axes, right-aligned (NumPy's broadcasting), and ``align_arrays``, so that inputs of different
chunks are rechunked to common ones, as the unfused operations would be; 0-d inputs are
broadcast per block. A lazy broadcast among the inputs (NOTE [lazy broadcasts] in the Dask
backend: the seed of a backward pass, a reduction's cotangent) enters by its small source, which
Dask broadcasts per block against the other inputs' chunks, as the backend's own elementwise
functions do. A group of several outputs is one task per chunk giving a tuple, and one task per
chunk per output taking its element (as ``dask.array.apply_gufunc`` does).
"""

import hashlib
import operator
import threading

import numpy as np

from . import lower_numba
from .fusion import fuse_elementwise, fusible, register_lowerer
from .ir import Program
from .passes import plan_memory
from .replay import compile_replay

_NUMBA_LOCK = threading.Lock()   # (Dask runs blocks in threads: one compilation per kernel)


class _ChunkKernel:
    """A fused group on NumPy blocks: ``kernel(*blocks)`` returns its output block (a tuple of
    them for several outputs)."""

    def __init__(self, sub, numpy_backend, scalar_in):
        self.n_out = len(sub.outs)
        self.dtypes = [np.dtype(v.dtype.name) for v in sub.outs]
        # ``scalar_in``: the inputs given 0-d (their staged shape, or a lazy broadcast's source),
        # which the numba loop reads as one element; the others are whole blocks of the
        # output's shape
        self.scalar_in = scalar_in
        prog = Program(sub.name, sub.in_vars, {}, sub.eqns, sub.outs, None, sub.out_spec,
                       numpy_backend)
        # (no out= buffers: a block of a lazy broadcast's source is smaller than the
        # intermediate values its staged shape promises, so none may be written into)
        self.replay = compile_replay(prog, flat=True, plan=plan_memory(prog))
        self.source = (lower_numba._source(sub, "kernel", scalar_in)
                       if lower_numba.available() and all(map(lower_numba.compilable, sub.eqns))
                       else None)
        self._loop = None

    def loop(self):
        """The numba loop (compiled on the first block large enough for it)."""
        if self._loop is None:
            with _NUMBA_LOCK:
                if self._loop is None:
                    self._loop = lower_numba._load(self.source)
        return self._loop

    def __call__(self, *blocks):
        shape = np.broadcast_shapes(*(np.shape(b) for b in blocks))
        n = lower_numba._size(shape)
        if (self.source is not None and n >= lower_numba.MIN_ELEMENTS
                and all(np.shape(b) == (() if s else shape)
                        for b, s in zip(blocks, self.scalar_in))):
            outs = [np.empty(shape, dt) for dt in self.dtypes]
            dt = self.dtypes[0]
            self.loop()(n, *(np.reshape(np.asarray(b, dt), (1,)) if s else np.ravel(b)
                             for b, s in zip(blocks, self.scalar_in)),
                        *(o.reshape(-1) for o in outs))
        else:
            outs = [o if np.shape(o) == shape else np.broadcast_to(o, shape)
                    for o in self.replay(*blocks)]
        return outs[0] if self.n_out == 1 else tuple(outs)

    def __getstate__(self):   # (a distributed scheduler ships the kernel: recompiled there)
        state = dict(self.__dict__)
        state["_loop"] = None
        return state


def make_kernel(sub):
    """(kernel, None) of a fused group of a Dask program: ``kernel(*dask_arrays)`` returns the
    tuple of the group's outputs, one blockwise layer (NOTE above)."""
    import dask.array as da
    from dask.base import tokenize
    from ..backends import get_backend
    from ..backends.dask import _source

    numpy_backend = get_backend("numpy")
    chunk_kernels = {}   # which inputs are 0-d -> _ChunkKernel
    # (the layer's name: the group's text and its inputs' names, so that the same group on the
    # same arrays is the same layer, as Dask names its own operations)
    key = hashlib.sha1(str(sub).encode()).hexdigest()[:16]
    shape = tuple(sub.outs[0].shape)
    dtypes = [np.dtype(v.dtype.name) for v in sub.outs]
    metas = [np.empty((0,) * len(shape), dt) for dt in dtypes]
    out_ind = tuple(range(len(shape)))[::-1]

    def layer_args(arrays):
        pairs = []
        for a in arrays:
            if not isinstance(a, da.Array) and np.ndim(a) == 0:
                pairs += [a, None]   # (a NumPy or Python scalar: given to every block)
            else:
                a = da.asarray(a)
                pairs += [a, tuple(range(a.ndim))[::-1]]
        return pairs

    def kernel(*raw):
        # lazy broadcasts by their sources, where another input still gives the full shape
        # (otherwise the layer would be smaller than the group's outputs)
        args = [_source(a) for a in raw]
        if np.broadcast_shapes(*(np.shape(a) for a in args)) != shape:
            args = list(raw)
        scalar_in = tuple(np.ndim(a) == 0 for a in args)
        chunk_kernel = chunk_kernels.get(scalar_in)
        if chunk_kernel is None:
            chunk_kernel = chunk_kernels[scalar_in] = _ChunkKernel(sub, numpy_backend,
                                                                   scalar_in)
        name = f"fused-{key}-{tokenize(*args)}"
        out = da.blockwise(chunk_kernel, out_ind, *layer_args(args), name=name,
                           dtype=dtypes[0], meta=metas[0], align_arrays=True)
        if len(dtypes) == 1:
            return (out,)
        # (the tuple layer's meta is the first output's: nothing reads it as an array)
        return tuple(da.map_blocks(operator.getitem, out, i, name=f"{name}-{i}", dtype=dt,
                                   meta=m)
                     for i, (dt, m) in enumerate(zip(dtypes, metas)))

    kernel.tier = "one Dask blockwise layer"
    return kernel, None


def wanted(prog):
    """Whether ``lower`` would fuse something of ``prog``: two fusible instructions."""
    return sum(1 for e in prog.eqns if fusible(e)) > 1


def lower(prog):
    """The fused program of ``prog``, one blockwise layer per group (NOTE above), or None."""
    if not wanted(prog):
        return None
    return fuse_elementwise(prog, fusible, make_kernel)


register_lowerer("dask", lower, wanted, after=lambda: 0.0)   # (when staged: the NOTE above)
