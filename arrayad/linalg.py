"""The array API ``linalg`` extension of 2025.12 (2024.12's functions plus ``eig`` and
``eigvals``).

Decompositions and solvers are primitives with VJP, JVP and batching rules; the rest are
composites. Everything lives in ``arrayad/_ops/linalg_ext.py``.
"""
from ._ops.linalg_ext import (EigResult, EighResult, QRResult, SlogdetResult,  # noqa: F401
                              SVDResult, cholesky, cross, det, diagonal, eig, eigh, eigvals,
                              eigvalsh, inv, matmul, matrix_norm, matrix_power, matrix_rank,
                              matrix_transpose, outer, pinv, qr, slogdet, solve, svd, svdvals,
                              tensordot, trace, vecdot, vector_norm)

__all__ = ["cholesky", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv",
           "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer",
           "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot",
           "vector_norm"]
