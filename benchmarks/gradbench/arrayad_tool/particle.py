"""particle: the charge position ``w`` for which a particle, fired from (0, 8) at (0.75, 0) and
accelerated by the gradient of the potential of two charges at (10, 10 - w) and (10, 0) (forward
Euler, steps of 0.1), crosses the x axis closest to the origin; by gradient descent on ``w``
through the simulation, whose every step takes the potential's gradient (nested AD). The four
functions differ in the mode of the outer and inner derivative: ``rf`` is reverse outside,
forward inside.

The simulation and the solver loop on values, so these functions are not staged by
``arrayad.jit`` (see :mod:`arrayad_tool.descent`).
"""

import numpy as np

import arrayad as ad

from . import Entry, as_float
from .descent import GRADIENTS, argmin


def distance(u, v):
    return ad.sqrt((u[0] - v[0]) * (u[0] - v[0]) + (u[1] - v[1]) * (u[1] - v[1]))


def landing_distance_squared(w, gradient_of):
    charges = [ad.stack([ad.asarray(10.0), 10.0 - w]), ad.asarray([10.0, 0.0])]

    def potential(x):
        return 1.0 / distance(x, charges[0]) + 1.0 / distance(x, charges[1])

    force = gradient_of(potential)
    dt = 0.1
    x, velocity = ad.asarray([0.0, 8.0]), ad.asarray([0.75, 0.0])
    while True:
        acceleration = -force(x)
        x_next = x + dt * velocity
        if x_next[1] < 0:
            break
        x, velocity = x_next, velocity + dt * acceleration
    dt_final = -x[1] / velocity[1]
    landing = x[0] + dt_final * velocity[0]
    return landing * landing


def particle(w0, outer, inner):
    return argmin(outer, lambda w: landing_distance_squared(w[0], inner), w0)[0]


def prepare(input):
    return (np.asarray([input["w"]], dtype=np.float64),)


def _entry(modes):
    outer, inner = GRADIENTS[modes[0]], GRADIENTS[modes[1]]
    return Entry(prepare, lambda w0: particle(w0, outer, inner), as_float, stageable=False)


FUNCTIONS = {modes: _entry(modes) for modes in ("rr", "ff", "fr", "rf")}
