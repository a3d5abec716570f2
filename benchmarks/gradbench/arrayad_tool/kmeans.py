"""kmeans: the k-means cost (each point's squared distance to its nearest centroid, summed) and
``dir``, one Newton step's direction: the gradient with respect to the centroids divided by the
Hessian's diagonal (the Hessian is diagonal, so its product with a vector of ones is that
diagonal: one forward-over-reverse product)."""

import numpy as np

import arrayad as ad
from arrayad.func import grad, jvp

from . import Entry, as_float, as_list


def cost(points, centroids):
    # |p - c|^2 = |p|^2 + |c|^2 - 2 p.c for all pairs: (n, k)
    distances = (
        ad.sum(points**2, axis=1)[:, None]
        + ad.sum(centroids**2, axis=1)[None, :]
        - 2 * (points @ ad.matrix_transpose(centroids))
    )
    return ad.sum(ad.min(distances, axis=1))


def direction(points, centroids):
    def cost_gradient(c):
        return grad(cost, argnums=1)(points, c)

    gradient, hessian_diagonal = jvp(cost_gradient, (centroids,), (ad.ones_like(centroids),))
    return gradient / hessian_diagonal


def prepare(input):
    return (
        np.asarray(input["points"], dtype=np.float64),
        np.asarray(input["centroids"], dtype=np.float64),
    )


FUNCTIONS = {
    "cost": Entry(prepare, cost, as_float),
    "dir": Entry(prepare, direction, as_list),
}
