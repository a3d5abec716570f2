"""scipy.special's functions that SciPy dispatches through ``xp.special`` (with
``SCIPY_ARRAY_API=1``), differentiable and batchable on every backend: primitives with VJP/JVP/
batching rules and composites, all in ``arrayad/_ops/special.py``."""
from ._ops.special import (digamma, entr, erf, erfc, erfinv, expit, gammaln, i0, i0e,  # noqa: F401
                           i1, i1e, log_expit, log_ndtr, log_softmax, logit, logsumexp, ndtr,
                           ndtri, polygamma, psi, rel_entr, sinc, softmax, xlog1py, xlogy)

__all__ = ["erf", "erfc", "erfinv", "ndtr", "log_ndtr", "ndtri", "gammaln", "digamma", "psi",
           "polygamma", "expit", "logit", "log_expit", "xlogy", "xlog1py", "entr", "rel_entr",
           "sinc", "i0", "i0e", "i1", "i1e", "logsumexp", "softmax", "log_softmax"]
