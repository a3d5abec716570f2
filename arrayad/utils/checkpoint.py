"""``arrayad.utils.checkpoint.checkpoint``: torch.utils.checkpoint's spelling of
``arrayad.func.checkpoint``."""

from collections.abc import Callable
from typing import Any, TypeVar

from .._custom import checkpoint as _checkpoint

__all__ = ["checkpoint"]

_R = TypeVar("_R")


def checkpoint(function: Callable[..., _R], *args: Any, use_reentrant: bool | None = None,
               context_fn: Any = None, determinism_check: str = "default", debug: bool = False,
               preserve_rng_state: bool = True, **kwargs: Any) -> _R:
    """Run ``function(*args, **kwargs)`` keeping only its inputs for the backward pass, which
    runs it again (``torch.utils.checkpoint.checkpoint``; the non-reentrant behaviour, whatever
    ``use_reentrant`` says).

    Values that need a gradient must be arguments (Tensors or arrays), not read from a closure:
    pass a block's parameters as arguments. Random numbers drawn inside are drawn again
    identically in the recomputation (torch's ``preserve_rng_state=True``).

    Returns
    -------
    array, Tensor or pytree
        What ``function`` returns.

    Raises
    ------
    TypeError
        If ``function`` reads a value the tape or a transform differentiates from a closure;
        if ``context_fn`` is given (not supported).

    See Also
    --------
    arrayad.func.checkpoint : JAX's spelling (``jax.checkpoint``), which this calls: a
        decorator, ``checkpoint(fun)(*args)``, with ``policy=`` (what to keep anyway) and
        ``static_argnums=``.

    Examples
    --------
    >>> from arrayad.utils.checkpoint import checkpoint
    >>> x = ad.tensor([0.5, 1.0], requires_grad=True)
    >>> y = checkpoint(lambda x: ad.sin(ad.sin(x)), x, use_reentrant=False)
    >>> ad.sum(y).backward()
    >>> x.grad
    tensor([0.7786, 0.3600])
    """
    if context_fn is not None:
        raise TypeError("arrayad.utils.checkpoint.checkpoint: context_fn is not supported")
    return _checkpoint(function)(*args, **kwargs)
