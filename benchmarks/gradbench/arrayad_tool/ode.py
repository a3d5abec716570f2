"""ode: ``s`` steps of fourth-order Runge-Kutta from ``y = 0`` to ``t = 2`` for
``y_0' = x_0``, ``y_i' = x_i y_{i-1}``; ``primal`` is the final state, ``gradient`` the gradient
of its last component with respect to ``x``."""

import numpy as np

import arrayad as ad
from arrayad.func import grad, scan

from . import Entry, as_list


def rhs(x, y):
    return ad.concat([x[:1], x[1:] * y[:-1]])


def solve(x, s):
    h = 2.0 / s

    def step(y, _):
        k1 = rhs(x, y)
        k2 = rhs(x, y + h / 2 * k1)
        k3 = rhs(x, y + h / 2 * k2)
        k4 = rhs(x, y + h * k3)
        return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4), None

    y, _ = scan(step, ad.zeros_like(x), None, length=s)
    return y


def gradient(x, s):
    return grad(lambda x: solve(x, s)[-1])(x)


def prepare(input):
    return (np.asarray(input["x"], dtype=np.float64), int(input["s"]))


FUNCTIONS = {
    "primal": Entry(prepare, solve, as_list, static_argnums=(1,)),
    "gradient": Entry(prepare, gradient, as_list, static_argnums=(1,)),
}
