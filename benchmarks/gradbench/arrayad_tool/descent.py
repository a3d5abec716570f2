"""The gradient-descent solver that GradBench's saddle and particle evals prescribe (a step
``eta`` that doubles after ten successful steps and halves after a failed one; stop when the
gradient or the step is shorter than 1e-5), written twice, as users write it for each mode:

* ``argmin``: Python control flow on the values, for eager runs (it runs inside ``grad`` and
  ``jacfwd``, which see each step's operations);
* ``staged_argmin``: a ``while_loop`` whose step selects its case with ``where``, for
  ``arrayad.jit`` (which cannot stage a Python ``if`` on a value); its derivative is reverse
  mode through a loop whose trip count depends on the values.

``gradient_of`` is ``reverse`` or ``forward``: how the solver differentiates its objective.
"""

import arrayad as ad
from arrayad.func import grad, jacfwd, while_loop


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


def staged_argmin(gradient_of, f, x):
    """The solver's loop: ``while not done``, one of its cases per step, in this order: the
    gradient is short (done); ten successes (double ``eta``); the step is short (done); the
    step lowers ``f`` (take it); else halve ``eta``."""
    g = gradient_of(f)

    def step(state):
        x, fx, gx, eta, successes, _ = state
        flat = _length(gx) <= 1e-5
        grow = successes == 10
        x_next = x - eta * gx
        short = _length(x - x_next) <= 1e-5
        f_next = f(x_next)
        take = ~flat & ~grow & ~short & (f_next < fx)
        fail = ~flat & ~grow & ~short & ~(f_next < fx)
        return (ad.where(take, x_next, x), ad.where(take, f_next, fx),
                ad.where(take, g(x_next), gx),
                ad.where(grow, 2 * eta, ad.where(fail, eta / 2, eta)),
                ad.where(take, successes + 1, ad.where(grow | fail, 0, successes)),
                flat | (~grow & short))

    state = (x, f(x), g(x), ad.asarray(1e-5), ad.asarray(0), ad.asarray(False))
    return while_loop(lambda s: ~s[5], step, state)[0]


def argmax(gradient_of, f, x, minimize=argmin):
    return minimize(gradient_of, lambda v: -f(v), x)


def maximum(gradient_of, f, x, minimize=argmin):
    return f(argmax(gradient_of, f, x, minimize))
