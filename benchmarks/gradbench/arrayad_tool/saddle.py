"""saddle: the saddle point of ``f(x, y) = (x_1^2 + y_1^2) - (x_2^2 + y_2^2)``, as
``argmin over p1 of (max over p2 of f(p1, p2))`` by nested gradient descent, then ``argmax over
p2 of f(r1, p2)``; the four functions differ in the mode (reverse or forward) of the outer and
inner derivative: ``rf`` is reverse outside, forward inside.

For ``--jit`` the solver is a ``while_loop`` (``staged``): the outer derivative runs through
the inner solver's loop (see :mod:`arrayad_tool.descent`).
"""

import numpy as np

import arrayad as ad

from . import Entry, as_list
from .descent import GRADIENTS, argmax, argmin, maximum, staged_argmin


def objective(p1, p2):
    return (p1[0] * p1[0] + p1[1] * p1[1]) - (p2[0] * p2[0] + p2[1] * p2[1])


def saddle(start, outer, inner, minimize=argmin):
    def inner_maximum(p1):
        return maximum(inner, lambda p2: objective(p1, p2), start, minimize)

    r1 = minimize(outer, inner_maximum, start)
    r2 = argmax(outer, lambda p2: objective(r1, p2), start, minimize)
    return ad.concat([r1, r2])


def prepare(input):
    return (np.asarray(input["start"], dtype=np.float64),)


def _entry(modes):
    outer, inner = GRADIENTS[modes[0]], GRADIENTS[modes[1]]
    return Entry(prepare, lambda start: saddle(start, outer, inner), as_list,
                 staged=lambda start: saddle(start, outer, inner, staged_argmin))


FUNCTIONS = {modes: _entry(modes) for modes in ("rr", "ff", "fr", "rf")}
