"""Pytrees: nested containers whose leaves the transforms operate on.

A pytree is either a *node* (a container whose type has a registered
flatten/unflatten pair) or a *leaf* (anything else, ``None`` included).
``tree_flatten`` walks a tree depth first and returns its leaves plus an
immutable :class:`TreeSpec` describing the nodes; ``tree_unflatten`` rebuilds
a tree of the same shape from new leaves.

Design notes:

* Dispatch is a single ``dict`` lookup from ``type(obj)`` to a ``_Node``
  (or ``None`` for leaf types).  The cache is filled lazily, so exact
  ``tuple``/``list``/``dict`` -- the hot path of every transform call --
  never go through an ``isinstance`` chain.  Subclasses are *not* nodes unless
  registered, except namedtuples (tuple subclasses with ``_fields``).
* ``dict`` keeps insertion order: ``{'a': 1, 'b': 2}`` and ``{'b': 2, 'a': 1}``
  have different specs (as in torch).  Only :func:`broadcast_prefix` matches
  dict keys by name, regardless of order.
* A ``TreeSpec`` stores the node type, the aux data returned by the flatten
  function and the child specs; equality and hashing are structural.  Leaves
  are all represented by the singleton :data:`LEAF`.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from itertools import islice

__all__ = [
    "LEAF",
    "TreeSpec",
    "broadcast_prefix",
    "register_dataclass",
    "register_pytree_node",
    "tree_flatten",
    "tree_leaves",
    "tree_map",
    "tree_structure",
    "tree_unflatten",
]


# ---------------------------------------------------------------------------
# Node registry and type dispatch
# ---------------------------------------------------------------------------


class _Node:
    """How to flatten/unflatten one node type."""

    __slots__ = ("type", "flatten", "unflatten", "kind", "direct")

    def __init__(self, typ, flatten, unflatten, kind):
        self.type = typ
        # tuple, list and namedtuple: the object itself is the children
        # sequence and aux_data is None, so the flatten call can be skipped.
        self.direct = kind in ("tuple", "list", "namedtuple")
        self.flatten = flatten  # obj -> (children iterable, aux_data)
        self.unflatten = unflatten  # (aux_data, children list) -> obj
        self.kind = kind  # "tuple", "list", "dict", "namedtuple" or "custom"


# Explicit registrations (built-ins, register_pytree_node, register_dataclass).
_REGISTRY: dict = {}
# type -> _Node, or None for leaf types.  Filled lazily by _resolve().
_DISPATCH: dict = {}
_MISSING = object()
# Specs of nodes whose children are all leaves and whose aux data is None,
# keyed by (type, number of children): flat tuples/lists are the common case,
# and sharing their spec saves allocations and makes spec comparison an
# identity check.  Only small nodes are cached.  Cleared whenever a
# registration changes a type's node.
_FLAT_SPECS: dict = {}
_FLAT_SPECS_MAX = 64


def _type_name(t) -> str:
    return getattr(t, "__qualname__", None) or getattr(t, "__name__", repr(t))


def _full_type_name(t) -> str:
    mod = getattr(t, "__module__", None)
    name = _type_name(t)
    return name if mod in (None, "builtins") else f"{mod}.{name}"


def _is_namedtuple_type(t) -> bool:
    return issubclass(t, tuple) and t is not tuple and hasattr(t, "_fields")


def _namedtuple_unflatten_for(cls):
    def unflatten(aux, children):
        return cls(*children)

    return unflatten


def _namedtuple_flatten(obj):
    return obj, None


def _resolve(t):
    """Slow path of the dispatch: find the node for type ``t`` and cache it."""
    node = _REGISTRY.get(t)
    if node is None and isinstance(t, type) and _is_namedtuple_type(t):
        node = _Node(t, _namedtuple_flatten, _namedtuple_unflatten_for(t), "namedtuple")
    _DISPATCH[t] = node
    return node


def _node_of(obj):
    t = type(obj)
    node = _DISPATCH.get(t, _MISSING)
    if node is _MISSING:
        node = _resolve(t)
    return node


def _register(cls, flatten_fn, unflatten_fn, kind):
    if not isinstance(cls, type):
        raise TypeError(f"pytree node type must be a class, got {cls!r}")
    if not callable(flatten_fn) or not callable(unflatten_fn):
        raise TypeError(
            f"flatten_fn and unflatten_fn must be callable when registering "
            f"{_full_type_name(cls)}"
        )
    if cls in _REGISTRY:
        raise ValueError(f"{_full_type_name(cls)} is already registered as a pytree node")
    node = _Node(cls, flatten_fn, unflatten_fn, kind)
    _REGISTRY[cls] = node
    _DISPATCH[cls] = node  # overrides a cached leaf / namedtuple entry
    _FLAT_SPECS.clear()
    return node


def register_pytree_node(cls, flatten_fn, unflatten_fn):
    """Register ``cls`` as a pytree node type, so that the transforms look inside it.

    Only the exact class is registered (subclasses stay leaves).

    Parameters
    ----------
    cls : type
        The container class.
    flatten_fn : callable
        ``flatten_fn(obj) -> (children, aux_data)``: ``children`` an iterable of subtrees,
        ``aux_data`` hashable, comparable static data (it becomes part of the ``TreeSpec``).
    unflatten_fn : callable
        ``unflatten_fn(aux_data, children: list) -> obj`` rebuilds the object.

    Returns
    -------
    None

    Raises
    ------
    TypeError
        If ``cls`` is not a class or a function is not callable.
    ValueError
        If ``cls`` is registered already.

    Examples
    --------
    A pair whose ``name`` is static data and whose ``value`` is differentiated:

    >>> from arrayad.func import grad, register_pytree_node
    >>> class Param:
    ...     def __init__(self, name, value):
    ...         self.name, self.value = name, value
    >>> register_pytree_node(Param, lambda p: ([p.value], p.name),
    ...                      lambda name, children: Param(name, children[0]))
    >>> g = grad(lambda p: ad.sum(p.value ** 2))(Param("w", np.array([1.0, 2.0])))
    >>> g.name, g.value
    ('w', array([2., 4.]))
    """
    _register(cls, flatten_fn, unflatten_fn, "custom")


def register_dataclass(cls):
    """Register a dataclass as a pytree node; usable as a decorator.

    Parameters
    ----------
    cls : type
        A dataclass. Every field with ``init=True`` is a child, in field order; fields with
        ``init=False`` are neither stored nor passed back (the constructor /
        ``__post_init__`` is expected to recompute them).

    Returns
    -------
    type
        ``cls`` itself.

    Raises
    ------
    TypeError
        If ``cls`` is not a dataclass type.
    ValueError
        If ``cls`` is registered already.

    Examples
    --------
    >>> import dataclasses
    >>> from arrayad.func import grad, register_dataclass
    >>> @register_dataclass
    ... @dataclasses.dataclass
    ... class Line:
    ...     slope: object
    ...     intercept: object
    >>> loss = lambda p: (p.slope * 2.0 + p.intercept - 1.0) ** 2   # at x = 2, target 1
    >>> g = grad(loss)(Line(np.array(1.0), np.array(0.0)))   # residual 1: d/dslope = 2 * 1 * 2
    >>> g.slope, g.intercept
    (array(4.), array(2.))
    """
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(
            f"register_dataclass expects a dataclass type (decorate the class with "
            f"@dataclasses.dataclass first), got {cls!r}"
        )
    names = tuple(f.name for f in dataclasses.fields(cls) if f.init)

    def flatten(obj):
        return [getattr(obj, n) for n in names], names

    def unflatten(aux, children):
        return cls(**dict(zip(aux, children)))

    _register(cls, flatten, unflatten, "custom")
    return cls


def _tuple_flatten(obj):
    return obj, None


def _tuple_unflatten(aux, children):
    return tuple(children)


def _list_flatten(obj):
    return obj, None


def _list_unflatten(aux, children):
    return list(children)


def _dict_flatten(obj):
    return obj.values(), tuple(obj)


def _dict_unflatten(aux, children):
    return dict(zip(aux, children))


def _odict_unflatten(aux, children):
    return OrderedDict(zip(aux, children))


_register(tuple, _tuple_flatten, _tuple_unflatten, "tuple")
_register(list, _list_flatten, _list_unflatten, "list")
_register(dict, _dict_flatten, _dict_unflatten, "dict")
_register(OrderedDict, _dict_flatten, _odict_unflatten, "dict")
_DISPATCH[type(None)] = None


# ---------------------------------------------------------------------------
# TreeSpec
# ---------------------------------------------------------------------------


class TreeSpec:
    """Immutable description of a pytree's structure.

    Attributes (read-only): ``type`` (node type, ``None`` for a leaf),
    ``aux_data``, ``children_specs`` (tuple of ``TreeSpec``), ``num_children``
    and ``num_leaves``.  Equality and hashing are structural.  Immutability
    is by construction: the public attributes are read-only properties and
    ``__slots__`` forbids new ones.
    """

    __slots__ = ("_type", "_aux", "_children", "_num_leaves", "_unflatten", "_flat", "_hash")

    def __init__(self, type, aux_data=None, children_specs=()):
        # Public constructor: validates and looks the node up in the registry.
        children = tuple(children_specs)
        if type is None:
            if children or aux_data is not None:
                raise ValueError("a leaf TreeSpec has no aux_data and no children")
            unflatten = None
        else:
            node = _DISPATCH.get(type, _MISSING)
            if node is _MISSING:
                node = _resolve(type)
            if node is None:
                raise TypeError(f"{_full_type_name(type)} is not a registered pytree node type")
            for c in children:
                if not isinstance(c, TreeSpec):
                    raise TypeError(f"children_specs must be TreeSpec instances, got {c!r}")
            # Canonicalize leaf children to the LEAF singleton (identity checks).
            children = tuple([LEAF if c._type is None else c for c in children])
            unflatten = node.unflatten
        self._init(type, aux_data, children, unflatten)

    def _init(self, typ, aux, children, unflatten):
        self._type = typ
        self._aux = aux
        self._children = children
        self._unflatten = unflatten
        n = 0
        flat = True
        for c in children:
            n += c._num_leaves
            if c is not LEAF:
                flat = False
        self._num_leaves = n if typ is not None else 1
        self._flat = flat
        self._hash = None

    @property
    def type(self):
        return self._type

    @property
    def aux_data(self):
        return self._aux

    @property
    def children_specs(self):
        return self._children

    @property
    def num_children(self) -> int:
        return len(self._children)

    @property
    def num_leaves(self) -> int:
        return self._num_leaves

    def is_leaf(self) -> bool:
        return self._type is None

    def unflatten(self, leaves):
        """Same as ``tree_unflatten(leaves, self)``."""
        return tree_unflatten(leaves, self)

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, TreeSpec):
            return NotImplemented
        return (
            self._type is other._type
            and self._num_leaves == other._num_leaves
            and self._children == other._children
            and self._aux == other._aux
        )

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        h = self._hash
        if h is None:
            h = hash((self._type, self._aux, self._children))
            self._hash = h
        return h

    def _repr_inner(self) -> str:
        if self._type is None:
            return "*"
        parts = [_type_name(self._type)]
        if self._type is dict or self._type is OrderedDict:
            parts.append(repr(list(self._aux)))
        elif self._aux is not None:
            parts.append(repr(self._aux))
        parts.append("[" + ", ".join(c._repr_inner() for c in self._children) + "]")
        return "TreeSpec(" + ", ".join(parts) + ")"

    def __repr__(self) -> str:
        if self._type is None:
            return "TreeSpec(*)"
        return self._repr_inner()

    def __reduce__(self):
        if self._type is None:
            return (_leaf_spec, ())
        return (TreeSpec, (self._type, self._aux, self._children))


def _make_spec(typ, aux, children, unflatten):
    spec = object.__new__(TreeSpec)
    spec._init(typ, aux, children, unflatten)
    return spec


# The TreeSpec of every leaf (a singleton; leaf checks use ``is LEAF``).
LEAF = object.__new__(TreeSpec)
LEAF._init(None, None, (), None)


def _leaf_spec():
    return LEAF


# ---------------------------------------------------------------------------
# Flatten / unflatten
# ---------------------------------------------------------------------------


def _flatten(x, leaves):
    t = type(x)
    node = _DISPATCH.get(t, _MISSING)
    if node is _MISSING:
        node = _resolve(t)
    if node is None:
        leaves.append(x)
        return LEAF
    if node.direct:
        children, aux = x, None
    else:
        children, aux = node.flatten(x)
    specs = []
    flat = True
    for c in children:
        ct = type(c)
        cnode = _DISPATCH.get(ct, _MISSING)
        if cnode is _MISSING:
            cnode = _resolve(ct)
        if cnode is None:
            leaves.append(c)
            specs.append(LEAF)
        else:
            specs.append(_flatten(c, leaves))
            flat = False
    if flat and aux is None and len(specs) <= _FLAT_SPECS_MAX:
        key = (t, len(specs))
        spec = _FLAT_SPECS.get(key)
        if spec is None:
            spec = _FLAT_SPECS[key] = _make_spec(t, None, tuple(specs), node.unflatten)
        return spec
    return _make_spec(t, aux, tuple(specs), node.unflatten)


def _flatten_is_leaf(x, leaves, is_leaf):
    if is_leaf(x):
        leaves.append(x)
        return LEAF
    t = type(x)
    node = _DISPATCH.get(t, _MISSING)
    if node is _MISSING:
        node = _resolve(t)
    if node is None:
        leaves.append(x)
        return LEAF
    children, aux = (x, None) if node.direct else node.flatten(x)
    specs = tuple([_flatten_is_leaf(c, leaves, is_leaf) for c in children])
    return _make_spec(t, aux, specs, node.unflatten)


def tree_flatten(tree, is_leaf=None):
    """Return ``(leaves, spec)``: the leaves of ``tree`` in depth-first order.

    Tuples, lists, dicts (in insertion order), namedtuples and registered classes are nodes;
    anything else, ``None`` included, is a leaf.

    Parameters
    ----------
    tree : object
        A pytree.
    is_leaf : callable, optional
        ``is_leaf(x) -> bool`` is called on every subtree (root included) before dispatch;
        when it returns true the subtree is a leaf.

    Returns
    -------
    leaves : list
        The leaves.
    spec : TreeSpec
        The structure, for ``tree_unflatten``; specs compare equal when the structures are.

    Raises
    ------
    Exception
        Nothing of its own: an error of a registered ``flatten_fn`` or of ``is_leaf``
        propagates.

    Examples
    --------
    >>> from arrayad.func import tree_flatten
    >>> leaves, spec = tree_flatten({"w": np.ones(2), "b": (1.0, None)})
    >>> leaves
    [array([1., 1.]), 1.0, None]
    >>> spec
    TreeSpec(dict, ['w', 'b'], [*, TreeSpec(tuple, [*, *])])
    """
    leaves = []
    if is_leaf is None:
        spec = _flatten(tree, leaves)
    else:
        spec = _flatten_is_leaf(tree, leaves, is_leaf)
    return leaves, spec


def _collect_leaves(x, leaves, is_leaf):
    # Called on nodes only (the caller has done the leaf checks for x).
    node = _DISPATCH[type(x)]
    for c in x if node.direct else node.flatten(x)[0]:
        if is_leaf is not None and is_leaf(c):
            leaves.append(c)
            continue
        ct = type(c)
        cnode = _DISPATCH.get(ct, _MISSING)
        if cnode is _MISSING:
            cnode = _resolve(ct)
        if cnode is None:
            leaves.append(c)
        else:
            _collect_leaves(c, leaves, is_leaf)


def tree_leaves(tree, is_leaf=None) -> list:
    """The leaves of ``tree`` (same order as :func:`tree_flatten`)."""
    if (is_leaf is not None and is_leaf(tree)) or _node_of(tree) is None:
        return [tree]
    leaves = []
    _collect_leaves(tree, leaves, is_leaf)
    return leaves


def tree_structure(tree, is_leaf=None) -> TreeSpec:
    """The :class:`TreeSpec` of ``tree``."""
    return tree_flatten(tree, is_leaf)[1]


def _build(spec, it):
    children = spec._children
    if spec._flat:
        values = list(islice(it, len(children)))
    else:
        values = [next(it) if c is LEAF else _build(c, it) for c in children]
    return spec._unflatten(spec._aux, values)


def tree_unflatten(leaves, spec: TreeSpec):
    """Rebuild a tree with structure ``spec`` from ``leaves`` (an iterable).

    Parameters
    ----------
    leaves : iterable
        As many leaves as ``spec`` has, in ``tree_flatten``'s order.
    spec : TreeSpec
        A structure returned by ``tree_flatten``.

    Returns
    -------
    object
        The tree.

    Raises
    ------
    TypeError
        If ``spec`` is not a ``TreeSpec``.
    ValueError
        If the number of leaves differs from the spec's.

    Examples
    --------
    >>> from arrayad.func import tree_flatten, tree_unflatten
    >>> leaves, spec = tree_flatten({"w": 1.0, "b": (2.0, 3.0)})
    >>> tree_unflatten([x * 10 for x in leaves], spec)
    {'w': 10.0, 'b': (20.0, 30.0)}
    """
    if not isinstance(spec, TreeSpec):
        raise TypeError(f"tree_unflatten expects a TreeSpec, got {type(spec).__name__}")
    if not isinstance(leaves, (list, tuple)):
        leaves = list(leaves)
    if len(leaves) != spec._num_leaves:
        raise ValueError(
            f"tree_unflatten: the spec {spec!r} has {spec._num_leaves} leaves, "
            f"but {len(leaves)} leaves were given"
        )
    if spec._flat:
        if spec._type is None:
            return leaves[0]
        if spec._type is tuple:
            return tuple(leaves)
        return spec._unflatten(spec._aux, list(leaves))
    return _build(spec, iter(leaves))


# ---------------------------------------------------------------------------
# tree_map
# ---------------------------------------------------------------------------


def tree_map(fn, tree, *rest, is_leaf=None):
    """Apply ``fn`` leafwise: ``fn(leaf, *matching leaves of rest)``.

    Parameters
    ----------
    fn : callable
        Called once per leaf, with the leaf of ``tree`` and those at the same place in
        ``rest``.
    tree : object
        A pytree.
    *rest
        Pytrees with exactly the structure of ``tree``.
    is_leaf : callable, optional
        As in ``tree_flatten``.

    Returns
    -------
    object
        A tree with the structure of ``tree`` and the results of ``fn`` as leaves.

    Raises
    ------
    ValueError
        If a tree in ``rest`` has another structure than ``tree``.

    Examples
    --------
    An update step on a dict of parameters and one of gradients:

    >>> from arrayad.func import tree_map
    >>> params, grads = {"w": 1.0, "b": 2.0}, {"w": 10.0, "b": -10.0}
    >>> tree_map(lambda p, g: p - 0.1 * g, params, grads)
    {'w': 0.0, 'b': 3.0}
    """
    leaves, spec = tree_flatten(tree, is_leaf)
    if not rest:
        return tree_unflatten([fn(x) for x in leaves], spec)
    all_leaves = [leaves]
    for i, other in enumerate(rest, 1):
        other_leaves, other_spec = tree_flatten(other, is_leaf)
        if other_spec != spec:
            raise ValueError(
                f"tree_map: all trees must have the same structure, but the first tree "
                f"has structure {spec!r} and tree {i} (counting from 0) has structure "
                f"{other_spec!r}"
            )
        all_leaves.append(other_leaves)
    return tree_unflatten([fn(*xs) for xs in zip(*all_leaves)], spec)


# ---------------------------------------------------------------------------
# broadcast_prefix
# ---------------------------------------------------------------------------


class _PrefixMismatch(Exception):
    def __init__(self, path, reason):
        super().__init__(reason)
        self.path = path
        self.reason = reason


def _describe_type(t) -> str:
    return _type_name(t)


def _broadcast(p, spec, is_leaf, out, path):
    if is_leaf is not None and is_leaf(p):
        pnode = None
    else:
        pnode = _node_of(p)
    if pnode is None:
        # A prefix leaf applies to the whole subtree at this position.
        if spec._type is None:
            out.append(p)
        else:
            out.extend([p] * spec._num_leaves)
        return
    if spec._type is None:
        raise _PrefixMismatch(
            path, f"the prefix has a {_describe_type(pnode.type)} node where the tree has a leaf"
        )
    pchildren, paux = pnode.flatten(p)
    pchildren = list(pchildren)
    ptype, ttype = pnode.type, spec._type
    tchildren = spec._children
    if ptype is not ttype and not (ptype is tuple and _is_namedtuple_type(ttype)):
        raise _PrefixMismatch(
            path,
            f"the prefix has a {_describe_type(ptype)} node where the tree has a "
            f"{_describe_type(ttype)} node",
        )
    if pnode.kind == "dict":
        tkeys = spec._aux
        if set(paux) != set(tkeys):
            missing = [k for k in tkeys if k not in paux]
            extra = [k for k in paux if k not in tkeys]
            detail = []
            if missing:
                detail.append(f"missing keys {missing!r}")
            if extra:
                detail.append(f"extra keys {extra!r}")
            raise _PrefixMismatch(
                path,
                f"the prefix dict has keys {list(paux)!r} but the tree dict has keys "
                f"{list(tkeys)!r} ({', '.join(detail)})",
            )
        by_key = dict(zip(paux, pchildren))
        for k, cspec in zip(tkeys, tchildren):
            _broadcast(by_key[k], cspec, is_leaf, out, path + (k,))
        return
    if len(pchildren) != len(tchildren):
        raise _PrefixMismatch(
            path,
            f"the prefix {_describe_type(ptype)} has {len(pchildren)} children but the tree "
            f"{_describe_type(ttype)} has {len(tchildren)}",
        )
    if ptype is ttype and paux != spec._aux:
        raise _PrefixMismatch(
            path,
            f"the prefix {_describe_type(ptype)} node has aux data {paux!r} but the tree "
            f"node has {spec._aux!r}",
        )
    for i, (pc, cspec) in enumerate(zip(pchildren, tchildren)):
        _broadcast(pc, cspec, is_leaf, out, path + (i,))


def _format_path(path) -> str:
    if not path:
        return "the root"
    return "".join(f"[{k!r}]" for k in path)


def broadcast_prefix(prefix, tree, is_leaf=None) -> list:
    """Match ``prefix`` (a prefix of ``tree``'s structure) against ``tree``.

    Returns one prefix leaf per leaf of ``tree`` (in ``tree_leaves(tree)``
    order): a prefix leaf standing where ``tree`` has a whole subtree is
    repeated for every leaf of that subtree.  ``None`` in the prefix is a
    leaf.  Node types must match exactly, except that a plain tuple in the
    prefix matches a namedtuple of the same length; dicts must have the same
    key set (order does not matter).  ``is_leaf`` applies to both trees.
    Raises ``ValueError`` when the structures are incompatible.
    """
    tree_spec = tree_structure(tree, is_leaf)
    if (is_leaf is not None and is_leaf(prefix)) or _node_of(prefix) is None:
        return [prefix] * tree_spec._num_leaves
    out = []
    try:
        _broadcast(prefix, tree_spec, is_leaf, out, ())
    except _PrefixMismatch as e:
        prefix_spec = tree_structure(prefix, is_leaf)
        raise ValueError(
            f"broadcast_prefix: prefix has structure {prefix_spec!r} but tree has structure "
            f"{tree_spec!r}; mismatch at {_format_path(e.path)}: {e.reason}"
        ) from None
    return out
