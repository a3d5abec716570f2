"""The API reference's docstrings of the core's public functions ``bind`` and
``is_grad_enabled``.

They are Cython functions whose docstrings are writable, so the full text (NumPy style, with
an example that runs as a doctest) is set here, in Python, while ``_core.pyx`` is being changed
by others; the first line of each keeps the signature Cython wrote, which Sphinx reads.
(``Tensor``'s docstring cannot be set from Python: an extension type's ``__doc__`` is
read-only.) Imported once by ``arrayad/__init__``.
"""

from ._core import _core


def _signature_line(fn):
    """The first line of a Cython docstring: the signature (``bind(Primitive prim, ...)``)."""
    return (fn.__doc__ or "").split("\n", 1)[0]


_core.bind.__doc__ = _signature_line(_core.bind) + '''

Apply the primitive ``prim`` to ``args``: by the innermost transform among the arguments, else
eagerly.

Every arrayad function ends in a ``bind``: the core finds the highest transform level among
the arguments (a ``grad``, ``jvp``, ``vmap`` or ``jit`` tracer, or an eager ``Tensor`` that
requires grad) and hands the call to that transform's interpreter, which applies the
primitive's rule (VJP, JVP, batching) and binds again one level down; with no tracer and
nothing to record, the backend's function is called directly. It is the entry point for a
primitive declared in ``arrayad/_ops`` (see ``arrayad/_ops/_rules.py``).

Parameters
----------
prim : Primitive
    The primitive, with its implementation and rules.
*args
    Its array arguments (any backend's arrays, ``ad.Tensor``, tracers) and Python scalars.
**params
    Its static keyword parameters (``axis=``, ``keepdims=``...).

Returns
-------
array, Tensor, tracer or tuple of them
    The primitive's result, of the arguments' kind: a backend array for backend arrays, a
    ``Tensor`` for Tensors, a tracer of the innermost transform inside one; a tuple for a
    primitive with several results.

Raises
------
TypeError
    If ``prim`` is not a ``Primitive``.
Exception
    Whatever the primitive's implementation or rules raise for these arguments (a
    non-differentiable primitive under ``grad``, a backend mismatch...).

Examples
--------
>>> from arrayad._ops.elementwise import PRIMS
>>> ad.bind(PRIMS["sin"], np.array([0.0, np.pi / 2]))
array([0., 1.])
>>> ad.func.grad(lambda x: ad.bind(PRIMS["sin"], x))(0.0)     # cos(0)
array(1.)
'''

_core.is_grad_enabled.__doc__ = _signature_line(_core.is_grad_enabled) + '''

Whether operations on tensors that require grad are recorded (in this thread).

Returns
-------
bool
    True unless a ``no_grad`` block or ``set_grad_enabled(False)`` is in force in this thread.

Raises
------
Exception
    Nothing of its own.

Examples
--------
>>> ad.is_grad_enabled()
True
>>> with ad.no_grad():
...     ad.is_grad_enabled()
False
'''
