"""lse: log-sum-exp of a vector (shifted by its maximum so that exp cannot overflow), and its
gradient."""

import numpy as np

import arrayad as ad
from arrayad.func import grad

from . import Entry, as_float, as_list


def logsumexp(x):
    x_max = ad.max(x)
    return ad.log(ad.sum(ad.exp(x - x_max))) + x_max


def gradient(x):
    return grad(logsumexp)(x)


def prepare(input):
    return (np.asarray(input["x"], dtype=np.float64),)


FUNCTIONS = {
    "primal": Entry(prepare, logsumexp, as_float),
    "gradient": Entry(prepare, gradient, as_list),
}
