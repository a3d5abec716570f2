"""Writes the API reference pages (``docs/api/generated/*.rst``) from the public names.

Every public name of ``arrayad``, ``arrayad.func``, ``arrayad.autograd`` (and its ``forward_ad``),
``arrayad.special``, ``arrayad.linalg``, ``arrayad.fft``, ``arrayad.testing``,
``arrayad.debug``, ``arrayad.tree_util``, ``arrayad.utils.checkpoint``, ``arrayad.backends``
and ``arrayad.config``
gets an entry, so that a name added to the package appears in the reference without editing a
page. The list of names is ``public_names`` (the test of the docstrings uses the same list).
"""

import importlib
import os
import types

# module -> (title, introduction)
MODULES = {
    "arrayad": ("arrayad", "The array API namespace (2025.12) with torch-style conveniences, "
                "the eager ``Tensor``, grad mode, backends and ``jit``."),
    "arrayad.func": ("arrayad.func", "The function transforms of torch.func."),
    "arrayad.autograd": ("arrayad.autograd", "The eager tape's API and ``Function``."),
    "arrayad.autograd.forward_ad": ("arrayad.autograd.forward_ad", "Forward-mode AD with dual "
                                   "tensors, as ``torch.autograd.forward_ad``."),
    "arrayad.special": ("arrayad.special", "scipy.special's functions, differentiable and "
                        "batchable, on every backend."),
    "arrayad.linalg": ("arrayad.linalg", "The array API ``linalg`` extension."),
    "arrayad.fft": ("arrayad.fft", "The array API ``fft`` extension."),
    "arrayad.testing": ("arrayad.testing", "Checking derivatives against finite differences."),
    "arrayad.debug": ("arrayad.debug", "Printing and callbacks inside transforms and ``jit``, "
                      "and finding the operation that makes the first NaN."),
    "arrayad.utils.checkpoint": ("arrayad.utils.checkpoint", "torch.utils.checkpoint's "
                                 "spelling of :func:`arrayad.func.checkpoint` (JAX's)."),
    "arrayad.tree_util": ("arrayad.tree_util", "Pytree utilities with JAX's names (the "
                          "correspondence with JAX and torch: :doc:`../../tree_util`)."),
    "arrayad.backends": ("arrayad.backends", "Choosing and adding array backends."),
    "arrayad.config": ("arrayad.config", "Settings, as ``jax.config``: ``with "
                       "arrayad.config.<name>(value):`` for the calling thread or task, "
                       "``arrayad.config.update(name, value)`` for the process; each default "
                       "from its environment variable, read once at import "
                       "(:doc:`../../config`)."),
}

# Where the namespace's functions are defined -> the heading they are listed under.
GROUPS = {
    "arrayad._ops.creation": "Creating arrays",
    "arrayad._ops.dtype_functions": "Data types",
    "arrayad._ops.elementwise": "Elementwise functions",
    "arrayad._ops.extras": "torch-style conveniences",
    "arrayad._ops.indexing": "Indexing",
    "arrayad._ops.linalg": "Linear algebra in the main namespace",
    "arrayad._ops.einsum": "Linear algebra in the main namespace",
    "arrayad._ops.manipulation": "Manipulating shapes",
    "arrayad._ops.reductions": "Reductions and statistics",
    "arrayad._ops.searching": "Searching, sorting and sets",
}

# Values (not functions) of the namespace: described here, since they carry no docstring.
CONSTANTS = {
    "e": "Euler's number, a Python float.",
    "pi": "The ratio of a circle's circumference to its diameter, a Python float.",
    "inf": "Positive infinity, a Python float.",
    "nan": "Not a number, a Python float.",
    "newaxis": "``None``: indexing with it adds an axis of length one.",
}


# Public names a module leaves out of its ``__all__`` so that a star import does not shadow a
# builtin: documented (and their docstrings tested) all the same.
NOT_STARRED = {"arrayad.func": ("map",)}


def public_names(modname):
    """The public names of ``modname``: its ``__all__`` (plus ``NOT_STARRED``), or else what
    ``dir`` shows that is not private and not a submodule."""
    mod = importlib.import_module(modname)
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n in dir(mod) if not n.startswith("_")
                 and not isinstance(getattr(mod, n), types.ModuleType)]
    return sorted(set(names) | set(NOT_STARRED.get(modname, ())))


def _is_dtype(obj):
    from arrayad import _dtypes
    return any(obj is getattr(_dtypes, n) for n in _dtypes.__all__)


def _defined_in(name, obj):
    """The module of ``arrayad/_ops`` that declares ``name``: its ``__module__``, or for the
    elementwise functions (generated with ``__module__`` 'arrayad') the module whose
    ``__all__`` lists it."""
    mod = getattr(obj, "__module__", "")
    if mod not in GROUPS:
        for group in GROUPS:
            if name in getattr(importlib.import_module(group), "__all__", ()):
                return group
    return mod


def _entry(modname, name, obj):
    if isinstance(obj, type):
        return f".. autoclass:: {modname}.{name}\n   :members:\n"
    if callable(obj):
        return f".. autofunction:: {modname}.{name}\n"
    return ""


def _page(modname):
    title, intro = MODULES[modname]
    mod = importlib.import_module(modname)
    names = public_names(modname)
    lines = [title, "=" * len(title), "", intro, "", f".. currentmodule:: {modname}", ""]
    groups = {}
    dtypes, constants = [], []
    for name in names:
        obj = getattr(mod, name)
        if modname == "arrayad" and name in CONSTANTS:
            constants.append(name)
        elif modname == "arrayad" and _is_dtype(obj):
            dtypes.append(name)
        else:
            heading = GROUPS.get(_defined_in(name, obj), "Transforms, tensors and state") \
                if modname == "arrayad" else "Functions and classes"
            groups.setdefault(heading, []).append(name)
    for heading in sorted(groups, key=lambda h: (h not in GROUPS.values(), h)):
        members = groups[heading]
        lines += [heading, "-" * len(heading), "", ".. autosummary::", ""]
        lines += [f"   {n}" for n in members] + [""]
        lines += [_entry(modname, n, getattr(mod, n)) for n in members]
    if dtypes:
        lines += ["Data types", "----------", "",
                  "The array API data types (NumPy's dtype objects on every backend; "
                  "``x.dtype == ad.float64`` holds for any backend's float64 array):", ""]
        lines += [f"- ``{n}``" for n in dtypes] + [""]
    if constants:
        lines += ["Constants", "---------", ""]
        lines += [f"- ``{n}``: {CONSTANTS[n]}" for n in constants] + [""]
    return "\n".join(lines)


def write_pages(app=None):
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "api",
                        "generated")
    os.makedirs(here, exist_ok=True)
    for modname in MODULES:
        text = _page(modname)
        path = os.path.join(here, modname + ".rst")
        old = open(path).read() if os.path.exists(path) else None
        if old != text:   # unchanged pages keep their time stamp: Sphinx rebuilds only what changed
            with open(path, "w") as f:
                f.write(text)


def setup(app):
    app.connect("builder-inited", write_pages)
    return {"parallel_read_safe": True}
