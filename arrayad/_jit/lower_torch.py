"""The torch lowerer of fused groups (NOTE [fusion]): ``torch.compile`` of each group's replay.

A fused group of a torch-backed program is its sub-program's replay (one torch call per
operation) compiled by ``torch.compile`` (inductor: on CPU one C++ loop per group, vectorised,
with its own vectorised transcendental functions, which NumPy's float64 loops and numba's calls
of the C library are not). Only the operations the numba lowerer compiles join a group
(``lower_numba.compilable``: the float arithmetic and elementary functions, operands of the
result's shape or 0-d), on CPU tensors; any other device replays the group unfused.

Measured single-threaded (``OMP_NUM_THREADS=1``, ``torch.set_num_threads(1)``) on the gradient
of the 13-operation chain (``benchmarks/torch_compile_fusion.py``, on a shared 2-core machine),
median per call, unfused -> fused: 0.073 -> 0.033 ms at 16 elements, 0.165 -> 0.073 ms at 1,024,
0.45 -> 0.22 ms at 16,384, 6-7 -> 0.74-0.97 ms at 65,536, 177 -> 14-22 ms at 10^6. It wins at
every size, so no size is left out; what it costs is the first compilation: 6-11 s with the
kernel in inductor's on-disk cache, 14-40 s without (inductor's import, its code generation and
a C++ compiler), against 20-300 ms for the first call unfused. So a program is lowered only
after ``arrayad.config.jit_torch_compile_after`` seconds (20) of unfused replays (NOTE [when to
compile]: the rent-or-buy rule with this compiler's cost); each group compiles on its first
call after that, and a compiler's failure (no C++ compiler) leaves that group's unfused replay,
with a warning.
"""

import importlib.util
import threading
import warnings

from .. import config as _config
from . import lower_numba
from .fusion import fuse_elementwise, fusible, register_lowerer
from .replay import compile_replay

def available():
    return importlib.util.find_spec("torch._inductor") is not None


def accept(e):
    """Whether ``e`` joins a group compiled by torch.compile (of any size: the docstring)."""
    return lower_numba.compilable(e)


def make_kernel(sub):
    """(kernel, None) of a fused group: ``kernel(*tensors)`` the tuple of its outputs."""
    import torch
    replay = compile_replay(sub, flat=True)
    compiled = torch.compile(replay, fullgraph=True, dynamic=False)
    run = []   # the function calls run: compiled (on its first call), or the replay
    lock = threading.Lock()

    def first(raw):
        with lock:
            if run:
                return run[0](*raw)
            if raw[0].device.type != "cpu":   # (compiled and tested for CPU tensors only)
                run.append(replay)
                return replay(*raw)
            try:
                out = compiled(*raw)   # (compiles: a program is per device, shape and dtype)
            except Exception as e:   # (no C++ compiler...: the unfused replay, as documented)
                warnings.warn(f"arrayad.jit({sub.name}): torch.compile of a fused group "
                              f"failed ({type(e).__name__}: {e}); it runs unfused.",
                              RuntimeWarning, stacklevel=4)
                run.append(replay)
                return replay(*raw)
            run.append(compiled)
            return out

    def kernel(*raw):
        return run[0](*raw) if run else first(raw)

    kernel.tier = "torch.compile"
    return kernel, None


def wanted(prog):
    """Whether ``lower`` would fuse something of ``prog`` (two instructions it compiles)."""
    return sum(1 for e in prog.eqns if fusible(e) and accept(e)) > 1 and available()


def lower(prog):
    """The fused program of ``prog`` with compiled groups (NOTE [fusion]), or None."""
    if not wanted(prog):
        return None
    return fuse_elementwise(prog, accept, make_kernel)


# (seconds of unfused replays before a program is compiled: about the compiler's time)
register_lowerer("torch", lower, wanted,
                 after=lambda: _config.read("jit_torch_compile_after"))
