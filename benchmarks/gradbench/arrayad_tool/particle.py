"""particle: the charge position ``w`` for which a particle, fired from (0, 8) at (0.75, 0) and
accelerated by the gradient of the potential of two charges at (10, 10 - w) and (10, 0) (forward
Euler, steps of 0.1), crosses the x axis closest to the origin; by gradient descent on ``w``
through the simulation, whose every step takes the potential's gradient (nested AD). The four
functions differ in the mode of the outer and inner derivative: ``rf`` is reverse outside,
forward inside.

For ``--jit`` the simulation and the solver are ``while_loop``s (``staged``): the outer
derivative runs through both loops (see :mod:`arrayad_tool.descent`).
"""

import numpy as np

import arrayad as ad

from arrayad.func import while_loop

from . import Entry, as_float
from .descent import GRADIENTS, argmin, staged_argmin


def distance(u, v):
    return ad.sqrt((u[0] - v[0]) * (u[0] - v[0]) + (u[1] - v[1]) * (u[1] - v[1]))


def landing_distance_squared(w, gradient_of, staged=False):
    charges = [ad.stack([ad.asarray(10.0), 10.0 - w]), ad.asarray([10.0, 0.0])]

    def potential(x):
        return 1.0 / distance(x, charges[0]) + 1.0 / distance(x, charges[1])

    force = gradient_of(potential)
    dt = 0.1
    x, velocity = ad.asarray([0.0, 8.0]), ad.asarray([0.75, 0.0])
    if staged:   # (until the next position is below the x axis)
        x, velocity = while_loop(lambda s: (s[0] + dt * s[1])[1] >= 0,
                                 lambda s: (s[0] + dt * s[1], s[1] - dt * force(s[0])),
                                 (x, velocity))
    else:
        while True:
            acceleration = -force(x)
            x_next = x + dt * velocity
            if x_next[1] < 0:
                break
            x, velocity = x_next, velocity + dt * acceleration
    dt_final = -x[1] / velocity[1]
    landing = x[0] + dt_final * velocity[0]
    return landing * landing


def particle(w0, outer, inner, staged=False):
    minimize = staged_argmin if staged else argmin
    return minimize(outer, lambda w: landing_distance_squared(w[0], inner, staged), w0)[0]


def prepare(input):
    return (np.asarray([input["w"]], dtype=np.float64),)


def _entry(modes):
    outer, inner = GRADIENTS[modes[0]], GRADIENTS[modes[1]]
    return Entry(prepare, lambda w0: particle(w0, outer, inner), as_float,
                 staged=lambda w0: particle(w0, outer, inner, staged=True))


FUNCTIONS = {modes: _entry(modes) for modes in ("rr", "ff", "fr", "rf")}
