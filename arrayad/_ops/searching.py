"""Searching, sorting and set functions (argmax/argmin live with the reductions; where with the
manipulation functions). Only ``sort`` is differentiable (it permutes its input)."""

import arrayad as ad

from .._core._core import bind
from ._rules import batch_axis_params, move_to_front, nondifferentiable, normalize_axis, primitive

__all__ = ["sort", "argsort", "nonzero", "searchsorted", "unique_all", "unique_counts",
           "unique_inverse", "unique_values", "isin"]
PRIMS = {}
COMPOSITES = {"sort"}


def _argsort_impl(xp, x, axis=-1, descending=False, stable=True):
    return xp.argsort(x, axis=axis, descending=descending, stable=stable)


argsort_p = primitive("argsort", _argsort_impl)
nondifferentiable(argsort_p)
argsort_p.batch = batch_axis_params(argsort_p)
PRIMS["argsort"] = argsort_p


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    """Indices that sort ``x`` along ``axis``."""
    return bind(argsort_p, x, axis=axis, descending=descending, stable=stable)


def sort(x, /, *, axis=-1, descending=False, stable=True):
    """``x`` sorted along ``axis`` (differentiable: a gather at the sorting indices)."""
    idx = argsort(ad.stop_gradient(x), axis=axis, descending=descending, stable=stable)
    return ad.take_along_axis(x, idx, axis=axis)


def _nonzero(*a, **k):
    raise NotImplementedError


nonzero = searchsorted = unique_all = unique_counts = unique_inverse = unique_values = isin = _nonzero
_unused = (move_to_front, normalize_axis)
