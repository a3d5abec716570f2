# cython: language_level=3
"""arrayad's hot core: the types every operation passes through, and no derivative rule.

What lives here, by module (each cimports only the ones above it, through their ``.pxd``, so that
a call from one to another is a C call):
  * ``_base.pyx``: the state a caller sets (NOTE [thread state]): grad mode and the open transforms,
    per context (``contextvars``); the random generators and the shared-result registry, per
    thread (``ThreadState``); the host interface (NOTE [host interface]); the backends of raw
    arrays; ``Primitive``, a named bundle of rules (the rules themselves are Python, in
    ``arrayad._ops``); the base class of the interpreters;
  * ``_arrays.pyx``: the array types (``Array``, the eager ``Tensor``, ``Tracer``) and ``bind``,
    which hands a call to the innermost interpreter among its arguments, else records it on the
    eager tape (``Node``); the shapes and dtypes of any value;
  * ``_interp.pyx``: the interpreters, one class per transform (``GradInterpreter``,
    ``JvpInterpreter``, ``BatchInterpreter``: NOTE [interpreters]) and their tracers;
  * ``_zeros.pyx``: the structural zeros of cotangents and tangents (NOTE [strong zeros]) and the
    rule shapes that most elementwise rules share (``UnaryVJP``...), in C because they run once
    per node of every pass;
  * ``_tape.pyx``: the backward engine (NOTE [eager tape]).

This module gathers their Python names: the package imports the core from here
(``from arrayad._core._core import ...``). Each type is declared for Cython code in the ``.pxd`` of
the module that defines it.
"""

from ._base import (backend_of, common_backend, escaped_error, fix_scalar, grad_mode, Host, host,
                    install_host, install_operators, Interpreter, interpreters, is_grad_enabled,
                    Meta, _not_installed, _OPERATORS, Primitive, _primitive_by_name, _PRIMITIVES,
                    register_backend_type, register_inplace_accumulation, register_primitive,
                    set_grad_enabled_flag, shared_result_count, stack_depth, thread_state,
                    ThreadState)
from ._arrays import (alias, Array, bind, dtype_of, forward_result, leaf_node, Node, raw_value,
                      _rebuild_tensor, shape_of, _Size, stamp_update, Tensor,
                      Tracer, view_of)
from ._interp import (BatchInterpreter, BatchTracer, DualTracer, GradInterpreter, GradTracer,
                      in_transform, JvpInterpreter, new_batch, new_dual, new_grad_tracer)
from ._zeros import (_BatchZeros, BinaryJVP, broadcast_like, conj_if_complex, constant_zeros,
                     _Entry, forget_zeros, install_complex_dtypes, is_complex, keep_zeros, _Mask,
                     PartialVJP, strong_products, structural_zero_count,
                     structural_zeros, SumJVP, SumVJP, UnaryJVP, _UnaryShape, UnaryVJP,
                     unbroadcast, zeros_mask)
from ._tape import (consumed_cotangents, owned, run_backward, topological_order, unit_cotangent)
