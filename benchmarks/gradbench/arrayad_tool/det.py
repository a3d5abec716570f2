"""det: the determinant of an ``ell`` x ``ell`` matrix given in row-major order, and its gradient
(row-major too).

GradBench's reference expands by minors; an arrayad user computes it with ``linalg.det``, whose
derivative arrayad supplies (the validation compares values, so both are accepted).
"""

import numpy as np

import arrayad as ad
from arrayad.func import grad

from . import Entry, as_float, as_list


def determinant(A, ell):
    return ad.linalg.det(ad.reshape(A, (ell, ell)))


def gradient(A, ell):
    return grad(determinant)(A, ell)


def prepare(input):
    return (np.asarray(input["A"], dtype=np.float64), int(input["ell"]))


FUNCTIONS = {
    "primal": Entry(prepare, determinant, as_float, static_argnums=(1,)),
    "gradient": Entry(prepare, gradient, as_list, static_argnums=(1,)),
}
