"""hello: ``square(x) = x * x`` and ``double(x)``, the derivative of ``square`` at ``x``."""

import numpy as np

from arrayad.func import grad

from . import Entry, as_float


def square(x):
    return x * x


def double(x):
    return grad(square)(x)


def _scalar(input):
    return (np.asarray(input, dtype=np.float64),)


FUNCTIONS = {
    "square": Entry(_scalar, square, as_float),
    "double": Entry(_scalar, double, as_float),
}
