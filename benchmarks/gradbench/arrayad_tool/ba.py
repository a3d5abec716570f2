"""ba: bundle adjustment's residuals (each observation's weighted reprojection error, and each
weight's ``1 - w^2``) and their sparse Jacobian.

A camera is 11 numbers: a Rodrigues rotation (3), its centre (3), the focal length, the
principal point (2) and two radial distortion coefficients. Observation ``i`` sees point
``i mod m`` from camera ``i mod n``; the input gives one camera, one point, one weight and one
feature, which the tool repeats (the work must be done for every copy). The Jacobian goes back as
GradBench's compressed sparse rows: for each observation two rows of 15 entries (its camera's
11 parameters, its point's 3, its weight), then one row per weight; only the first 30 entries and
the last are sent.
"""

import numpy as np

import arrayad as ad
from arrayad.func import jacrev, vmap

from . import Entry

CAMERA_PARAMETERS = 11


def rotate(rotation, point):
    """Rodrigues' formula: ``point`` rotated about ``rotation`` by its length, in radians."""
    angle_squared = ad.sum(rotation * rotation)
    nonzero = angle_squared != 0
    angle = ad.sqrt(ad.where(nonzero, angle_squared, 1.0))  # the other branch needs no angle
    axis = rotation / angle
    cos, sin = ad.cos(angle), ad.sin(angle)
    rotated = (point * cos + ad.linalg.cross(axis, point) * sin
               + axis * (ad.sum(axis * point) * (1 - cos)))
    # At a zero angle, the formula's first-order expansion.
    return ad.where(nonzero, rotated, point + ad.linalg.cross(rotation, point))


def reprojection_error(camera, point, weight, feature):
    seen = rotate(camera[0:3], point - camera[3:6])
    projected = seen[:2] / seen[2]
    radius_squared = ad.sum(projected * projected)
    distortion = 1 + camera[9] * radius_squared + camera[10] * radius_squared * radius_squared
    pixel = projected * distortion * camera[6] + camera[7:9]
    return weight * (pixel - feature)


def observations(cameras, points, weights, features, camera_of, point_of):
    return (ad.take(cameras, camera_of, axis=0), ad.take(points, point_of, axis=0), weights,
            features)


def objective(cameras, points, weights, features, camera_of, point_of):
    errors = vmap(reprojection_error)(
        *observations(cameras, points, weights, features, camera_of, point_of))
    return errors, 1 - weights * weights


def jacobian(cameras, points, weights, features, camera_of, point_of):
    """Rows, columns and values of the whole sparse Jacobian (3p rows)."""
    n, m, p = cameras.shape[0], points.shape[0], weights.shape[0]
    d_camera, d_point, d_weight = vmap(jacrev(reprojection_error, argnums=(0, 1, 2)))(
        *observations(cameras, points, weights, features, camera_of, point_of))
    block = ad.concat([d_camera, d_point, d_weight[:, :, None]], axis=2)  # (p, 2, 15)
    values = ad.concat([ad.reshape(block, (-1,)), -2 * weights])
    row_starts = ad.concat([ad.arange(0, 30 * p + 1, 15), 30 * p + ad.arange(1, p + 1)])
    columns_of_block = ad.concat([
        CAMERA_PARAMETERS * camera_of[:, None] + ad.arange(CAMERA_PARAMETERS)[None, :],
        CAMERA_PARAMETERS * n + 3 * point_of[:, None] + ad.arange(3)[None, :],
        (CAMERA_PARAMETERS * n + 3 * m + ad.arange(p))[:, None],
    ], axis=1)  # (p, 15): the same for both rows of an observation
    columns = ad.concat([
        ad.reshape(ad.stack([columns_of_block, columns_of_block], axis=1), (-1,)),
        CAMERA_PARAMETERS * n + 3 * m + ad.arange(p),
    ])
    return row_starts, columns, values


def prepare(input):
    n, m, p = input["n"], input["m"], input["p"]
    observation = np.arange(p)
    return (
        np.tile(np.asarray(input["cam"], dtype=np.float64), (n, 1)),
        np.tile(np.asarray(input["x"], dtype=np.float64), (m, 1)),
        np.full(p, float(input["w"])),
        np.tile(np.asarray(input["feat"], dtype=np.float64), (p, 1)),
        observation % n,
        observation % m,
    )


def objective_output(result):
    errors, weight_errors = (np.asarray(r) for r in result)
    return {"reproj_error": {"elements": errors[0].tolist(), "repeated": len(errors)},
            "w_err": {"element": float(weight_errors[0]), "repeated": len(weight_errors)}}


def jacobian_output(result):
    def head_and_last(values):
        values = np.asarray(values)
        return np.concatenate([values[:30], values[-1:]]).tolist()

    rows, columns, values = result
    return {"rows": head_and_last(rows), "cols": head_and_last(columns),
            "vals": head_and_last(values)}


FUNCTIONS = {
    "objective": Entry(prepare, objective, objective_output),
    "jacobian": Entry(prepare, jacobian, jacobian_output),
}
