"""The array API ``linalg`` extension."""
from ._ops.linalg import matmul, tensordot, vecdot  # noqa: F401
from ._ops.manipulation import matrix_transpose  # noqa: F401

__all__ = ["matmul", "tensordot", "vecdot", "matrix_transpose"]
