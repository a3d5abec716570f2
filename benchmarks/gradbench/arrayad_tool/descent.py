"""The gradient-descent solver that GradBench's saddle and particle evals prescribe (a step
``eta`` that doubles after ten successful steps and halves after a failed one; stop when the
gradient or the step is shorter than 1e-5), written with Python control flow on the values, so
that it runs inside ``grad`` and ``jacfwd`` and can itself be differentiated (nested AD).

``gradient_of`` is ``reverse`` or ``forward``: how the solver differentiates its objective.
"""

import arrayad as ad
from arrayad.func import grad, jacfwd


def reverse(f):
    return grad(f)


def forward(f):
    return jacfwd(f)  # of a scalar function of a vector: its gradient, one column per input


GRADIENTS = {"r": reverse, "f": forward}


def _length(v):
    return ad.sqrt(ad.sum(v * v))


def argmin(gradient_of, f, x):
    g = gradient_of(f)
    fx, gx = f(x), g(x)
    eta, successes = 1e-5, 0
    while True:
        if _length(gx) <= 1e-5:
            return x
        if successes == 10:
            eta, successes = 2 * eta, 0
            continue
        x_next = x - eta * gx
        if _length(x - x_next) <= 1e-5:
            return x
        f_next = f(x_next)
        if f_next < fx:
            x, fx, gx = x_next, f_next, g(x_next)
            successes += 1
        else:
            eta, successes = eta / 2, 0


def argmax(gradient_of, f, x):
    return argmin(gradient_of, lambda v: -f(v), x)


def maximum(gradient_of, f, x):
    return f(argmax(gradient_of, f, x))
