"""arrayad as a GradBench tool: one module per eval, and a runner speaking GradBench's protocol.

Each eval module is written the way an arrayad user would write it (``import arrayad as ad``,
``arrayad.func`` transforms) and declares ``FUNCTIONS``: the eval's function names mapped to an
:class:`Entry`. The runner (``python -m arrayad_tool [--jit]``) reads GradBench's JSON-lines
messages on stdin and answers on stdout; ``--jit`` wraps every entry's ``compute`` with
``arrayad.jit``.
"""

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

__all__ = ["Entry", "EVALS", "as_float", "as_list"]

# The evals this tool implements, in the order they were written.
EVALS = ("hello", "lse", "gmm", "kmeans", "ode", "llsq", "lstm", "det", "saddle", "particle", "ba")


@dataclass(frozen=True)
class Entry:
    """One function of an eval.

    ``prepare`` turns the eval's JSON input into the positional arguments of ``compute`` (NumPy
    arrays and Python ints); this conversion is not timed, as in GradBench's own tools.
    ``compute`` is the timed work, a function of arrays that returns arrays; it is what ``--jit``
    wraps, with ``static_argnums`` naming its integer arguments. ``post`` turns its result back
    into JSON. ``staged``, where given, is what ``--jit`` stages instead of ``compute``: the same
    function written for ``jit`` (a solver as a ``while_loop``, where ``compute`` loops in
    Python, which is faster eagerly and which ``jit`` cannot stage).
    """

    prepare: Callable[[Any], tuple]
    compute: Callable[..., Any]
    post: Callable[[Any], Any]
    static_argnums: tuple = field(default=())
    staged: Callable[..., Any] | None = None


def as_float(value) -> float:
    return float(np.asarray(value))


def as_list(value) -> list:
    return np.asarray(value).tolist()
