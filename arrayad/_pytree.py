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
* Key paths (``tree_flatten_with_path``) name each child with a key entry
  (``SequenceKey``, ``DictKey``, ``GetAttrKey``, ``FlattenedIndexKey``: JAX's
  classes and strings).  Every node has a ``flatten_with_keys`` of its own, so
  the keyed walk is a twin of ``_flatten`` off the hot path, and the public
  face of all this is ``arrayad.tree_util``.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from itertools import islice

__all__ = [
    "LEAF",
    "TreeSpec",
    "DictKey",
    "FlattenedIndexKey",
    "GetAttrKey",
    "SequenceKey",
    "broadcast_prefix",
    "keystr",
    "register_dataclass",
    "register_pytree_node",
    "register_pytree_node_class",
    "register_pytree_with_keys",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_leaves_with_path",
    "tree_map",
    "tree_map_with_path",
    "tree_structure",
    "tree_unflatten",
]


# ---------------------------------------------------------------------------
# Key entries: how a key path names a child (JAX's classes, reprs and strings)
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """The child at position ``idx`` of a tuple or list, in a key path: ``str`` gives ``[0]``.

    Raises
    ------
    dataclasses.FrozenInstanceError
        On assignment to ``idx`` (entries are immutable and hashable).

    Examples
    --------
    >>> from arrayad.tree_util import SequenceKey, tree_leaves_with_path
    >>> tree_leaves_with_path((1.0, 2.0))[1]
    ((SequenceKey(idx=1),), 2.0)
    >>> str(SequenceKey(1))
    '[1]'
    """

    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True)
class DictKey:
    """The value under ``key`` of a dict, in a key path: ``str`` gives ``['w']``.

    torch's ``torch.utils._pytree.MappingKey``.

    Raises
    ------
    dataclasses.FrozenInstanceError
        On assignment to ``key`` (entries are immutable and hashable).

    Examples
    --------
    >>> from arrayad.tree_util import DictKey, tree_leaves_with_path
    >>> tree_leaves_with_path({"w": 1.0})
    [((DictKey(key='w'),), 1.0)]
    >>> str(DictKey("w"))
    "['w']"
    """

    key: object

    def __str__(self):
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """The attribute ``name`` of a namedtuple or dataclass, in a key path: ``str`` gives
    ``.name``.

    Raises
    ------
    dataclasses.FrozenInstanceError
        On assignment to ``name`` (entries are immutable and hashable).

    Examples
    --------
    >>> from collections import namedtuple
    >>> from arrayad.tree_util import GetAttrKey, tree_leaves_with_path
    >>> Point = namedtuple("Point", "x y")
    >>> tree_leaves_with_path(Point(1.0, 2.0))[1]
    ((GetAttrKey(name='y'),), 2.0)
    >>> str(GetAttrKey("y"))
    '.y'
    """

    name: str

    def __str__(self):
        return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    """The ``key``-th child of a registered node that names no keys of its own (registered
    without ``flatten_with_keys_fn``), in a key path.

    Raises
    ------
    dataclasses.FrozenInstanceError
        On assignment to ``key`` (entries are immutable and hashable).

    Examples
    --------
    >>> from arrayad.tree_util import FlattenedIndexKey
    >>> str(FlattenedIndexKey(0))
    '[<flat index 0>]'
    """

    key: int

    def __str__(self):
        return f"[<flat index {self.key}>]"


def _simple_key(k) -> str:
    if isinstance(k, SequenceKey):
        return str(k.idx)
    if isinstance(k, DictKey):
        return str(k.key)
    if isinstance(k, GetAttrKey):
        return k.name
    if isinstance(k, FlattenedIndexKey):
        return str(k.key)
    return str(k)


def keystr(keys, *, simple=False, separator=""):
    """A key path as a string: ``"['w'][0]"``, as ``jax.tree_util.keystr``.

    Parameters
    ----------
    keys : tuple
        A key path (from ``tree_flatten_with_path``): key entries, or anything ``str`` takes.
    simple : bool, optional
        Write each entry bare (``w``, ``0``, ``name``) instead of ``['w']``, ``[0]``,
        ``.name``; shorter, but ``0`` may then be a position or a dict key.
    separator : str, optional
        Put between the entries (default: nothing).

    Returns
    -------
    str
        The entries' strings joined.

    Raises
    ------
    TypeError
        If ``keys`` is not iterable.

    Examples
    --------
    >>> from arrayad.tree_util import keystr, tree_leaves_with_path
    >>> [keystr(path) for path, _ in tree_leaves_with_path({"w": [1.0, 2.0]})]
    ["['w'][0]", "['w'][1]"]
    >>> keystr(tree_leaves_with_path({"w": [1.0, 2.0]})[1][0], simple=True, separator="/")
    'w/1'
    """
    return separator.join(map(_simple_key if simple else str, keys))


# ---------------------------------------------------------------------------
# Node registry and type dispatch
# ---------------------------------------------------------------------------


class _Node:
    """How to flatten/unflatten one node type."""

    __slots__ = ("type", "flatten", "unflatten", "kind", "direct", "flatten_with_keys")

    def __init__(self, typ, flatten, unflatten, kind, flatten_with_keys=None):
        self.type = typ
        # tuple, list and namedtuple: the object itself is the children
        # sequence and aux_data is None, so the flatten call can be skipped.
        self.direct = kind in ("tuple", "list", "namedtuple")
        self.flatten = flatten  # obj -> (children iterable, aux_data)
        self.unflatten = unflatten  # (aux_data, children list) -> obj
        self.kind = kind  # "tuple", "list", "dict", "namedtuple" or "custom"
        # obj -> (iterable of (key entry, child), aux_data): the children of
        # ``flatten`` in the same order, each with its key (key paths only).
        self.flatten_with_keys = flatten_with_keys or self._indexed

    def _indexed(self, obj):
        # A registered node without keys of its own: its children by position.
        children, aux = self.flatten(obj)
        return [(FlattenedIndexKey(i), c) for i, c in enumerate(children)], aux


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


def _namedtuple_flatten_with_keys(obj):
    return [(GetAttrKey(f), c) for f, c in zip(type(obj)._fields, obj)], None


def _resolve(t):
    """Slow path of the dispatch: find the node for type ``t`` and cache it."""
    node = _REGISTRY.get(t)
    if node is None and isinstance(t, type) and _is_namedtuple_type(t):
        node = _Node(t, _namedtuple_flatten, _namedtuple_unflatten_for(t), "namedtuple",
                     _namedtuple_flatten_with_keys)
    _DISPATCH[t] = node
    return node


def _node_of(obj):
    t = type(obj)
    node = _DISPATCH.get(t, _MISSING)
    if node is _MISSING:
        node = _resolve(t)
    return node


def _register(cls, flatten_fn, unflatten_fn, kind, flatten_with_keys_fn=None):
    if not isinstance(cls, type):
        raise TypeError(f"pytree node type must be a class, got {cls!r}")
    if not callable(flatten_fn) or not callable(unflatten_fn):
        raise TypeError(
            f"flatten_fn and unflatten_fn must be callable when registering "
            f"{_full_type_name(cls)}"
        )
    if flatten_with_keys_fn is not None and not callable(flatten_with_keys_fn):
        raise TypeError(
            f"flatten_with_keys_fn must be callable (or None) when registering "
            f"{_full_type_name(cls)}, got {flatten_with_keys_fn!r}"
        )
    if cls in _REGISTRY:
        raise ValueError(f"{_full_type_name(cls)} is already registered as a pytree node")
    node = _Node(cls, flatten_fn, unflatten_fn, kind, flatten_with_keys_fn)
    _REGISTRY[cls] = node
    _DISPATCH[cls] = node  # overrides a cached leaf / namedtuple entry
    _FLAT_SPECS.clear()
    return node


def register_pytree_node(cls, flatten_fn, unflatten_fn, *, flatten_with_keys_fn=None):
    """Register ``cls`` as a pytree node type, so that the transforms look inside it.

    Only the exact class is registered (subclasses stay leaves). The argument order of
    ``unflatten_fn`` is JAX's, ``(aux_data, children)``: torch's ``register_pytree_node``
    takes ``(children, context)``; swap them when porting from torch.

    Parameters
    ----------
    cls : type
        The container class.
    flatten_fn : callable
        ``flatten_fn(obj) -> (children, aux_data)``: ``children`` an iterable of subtrees,
        ``aux_data`` hashable, comparable static data (it becomes part of the ``TreeSpec``).
    unflatten_fn : callable
        ``unflatten_fn(aux_data, children: list) -> obj`` rebuilds the object.
    flatten_with_keys_fn : callable, optional
        ``flatten_with_keys_fn(obj) -> (((key, child), ...), aux_data)``: the children of
        ``flatten_fn`` in the same order, each with the key entry that names it in key
        paths (torch's keyword). Without it a child's key is ``FlattenedIndexKey(i)``.

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
    _register(cls, flatten_fn, unflatten_fn, "custom", flatten_with_keys_fn)


def register_pytree_with_keys(nodetype, flatten_with_keys, unflatten_func, flatten_func=None):
    """JAX's spelling: register ``nodetype`` with a flatten function that names its children.

    Parameters
    ----------
    nodetype : type
        The container class.
    flatten_with_keys : callable
        ``flatten_with_keys(obj) -> (((key, child), ...), aux_data)``.
    unflatten_func : callable
        ``unflatten_func(aux_data, children: list) -> obj``.
    flatten_func : callable, optional
        ``flatten_func(obj) -> (children, aux_data)``, the same children without their keys
        (the transforms' faster path); by default made from ``flatten_with_keys``.

    Returns
    -------
    None

    Raises
    ------
    TypeError
        If ``nodetype`` is not a class or a function is not callable.
    ValueError
        If ``nodetype`` is registered already.

    Examples
    --------
    >>> from arrayad.tree_util import GetAttrKey, keystr, register_pytree_with_keys
    >>> from arrayad.tree_util import tree_leaves_with_path
    >>> class Point:
    ...     def __init__(self, x, y):
    ...         self.x, self.y = x, y
    >>> register_pytree_with_keys(
    ...     Point, lambda p: (((GetAttrKey("x"), p.x), (GetAttrKey("y"), p.y)), None),
    ...     lambda aux, children: Point(*children))
    >>> [(keystr(k), v) for k, v in tree_leaves_with_path(Point(1.0, 2.0))]
    [('.x', 1.0), ('.y', 2.0)]
    """
    if not callable(flatten_with_keys):
        raise TypeError(f"register_pytree_with_keys: flatten_with_keys must be callable, got "
                        f"{flatten_with_keys!r}")
    if flatten_func is None:
        def flatten_func(obj):
            pairs, aux = flatten_with_keys(obj)
            return [c for _, c in pairs], aux
    _register(nodetype, flatten_func, unflatten_func, "custom", flatten_with_keys)


def register_pytree_node_class(cls):
    """Register a class that flattens itself: a class decorator, as JAX's.

    The class defines ``tree_flatten(self) -> (children, aux_data)`` and a classmethod
    ``tree_unflatten(cls, aux_data, children) -> instance``.

    Parameters
    ----------
    cls : type
        The class.

    Returns
    -------
    type
        ``cls`` itself.

    Raises
    ------
    TypeError
        If ``cls`` is not a class or lacks one of the two methods.
    ValueError
        If ``cls`` is registered already.

    Examples
    --------
    >>> from arrayad.func import grad
    >>> from arrayad.tree_util import register_pytree_node_class
    >>> @register_pytree_node_class
    ... class Scaled:
    ...     def __init__(self, value, scale):
    ...         self.value, self.scale = value, scale
    ...     def tree_flatten(self):
    ...         return (self.value,), self.scale      # scale: static data
    ...     @classmethod
    ...     def tree_unflatten(cls, scale, children):
    ...         return cls(children[0], scale)
    >>> grad(lambda s: ad.sum(s.value ** 2) * s.scale)(Scaled(np.array([1.0, 2.0]), 3)).value
    array([ 6., 12.])
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_pytree_node_class decorates a class, got {cls!r}")
    missing = [m for m in ("tree_flatten", "tree_unflatten") if not callable(getattr(cls, m, None))]
    if missing:
        raise TypeError(
            f"register_pytree_node_class: {_full_type_name(cls)} lacks "
            f"{' and '.join(missing)}: define tree_flatten(self) -> (children, aux_data) and "
            f"the classmethod tree_unflatten(cls, aux_data, children)"
        )
    _register(cls, lambda obj: obj.tree_flatten(), cls.tree_unflatten, "custom")
    return cls


def register_dataclass(cls=None, data_fields=None, meta_fields=None, drop_fields=()):
    """Register a dataclass as a pytree node; usable as a decorator (JAX's signature).

    Parameters
    ----------
    cls : type
        A dataclass (any class when both ``data_fields`` and ``meta_fields`` are given: it is
        then rebuilt by ``cls(**fields)``). Without it, a decorator is returned.
    data_fields : sequence of str, optional
        The fields that are children (differentiated, batched), in this order. By default
        every field with ``init=True`` that is not a meta field, in field order.
    meta_fields : sequence of str, optional
        The fields that are static data, part of the structure (hashable values: two trees
        whose meta fields differ have different structures). When neither list is given, the
        fields declared with ``dataclasses.field(metadata={"static": True})``; when only one
        is, the other holds the rest of the ``init`` fields.
    drop_fields : sequence of str, optional
        ``init=True`` fields that are neither: left out, so the constructor's default is used
        when the tree is rebuilt. Fields with ``init=False`` are never passed back (the
        constructor / ``__post_init__`` is expected to recompute them).

    Returns
    -------
    type
        ``cls`` itself (or a decorator when ``cls`` is None).

    Raises
    ------
    TypeError
        If ``cls`` is not a dataclass and the fields are not both given.
    ValueError
        If ``cls`` is registered already, or the fields named miss or repeat an ``init``
        field of the dataclass.

    Examples
    --------
    >>> import dataclasses
    >>> from arrayad.func import grad, register_dataclass
    >>> @register_dataclass
    ... @dataclasses.dataclass
    ... class Line:
    ...     slope: object
    ...     intercept: object
    ...     name: str = dataclasses.field(default="line", metadata={"static": True})
    >>> loss = lambda p: (p.slope * 2.0 + p.intercept - 1.0) ** 2   # at x = 2, target 1
    >>> g = grad(loss)(Line(np.array(1.0), np.array(0.0)))   # residual 1: d/dslope = 2 * 1 * 2
    >>> g.slope, g.intercept, g.name
    (array(4.), array(2.), 'line')
    """
    if cls is None:
        return lambda c: register_dataclass(c, data_fields, meta_fields, drop_fields)
    is_dc = isinstance(cls, type) and dataclasses.is_dataclass(cls)
    if not is_dc and (data_fields is None or meta_fields is None or not isinstance(cls, type)):
        raise TypeError(
            f"register_dataclass expects a dataclass type (decorate the class with "
            f"@dataclasses.dataclass first), or a class with both data_fields= and "
            f"meta_fields= given, got {cls!r}"
        )
    drop = tuple(drop_fields)
    if is_dc:
        fields = [f for f in dataclasses.fields(cls) if f.init and f.name not in drop]
        init_names = [f.name for f in fields]
        if data_fields is None and meta_fields is None:
            meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
        if meta_fields is None:   # (one list given: the other is the rest)
            meta_fields = [n for n in init_names if n not in data_fields]
        if data_fields is None:
            data_fields = [n for n in init_names if n not in meta_fields]
        named = list(data_fields) + list(meta_fields)
        problems = []
        missing = [n for n in init_names if n not in named]
        if missing:
            problems.append(f"init fields named nowhere: {missing} (add them to data_fields, "
                            f"meta_fields or drop_fields)")
        unknown = [n for n in named if n not in init_names]
        if unknown:
            problems.append(f"not init fields of the dataclass: {unknown}")
        repeated = sorted({n for n in named if named.count(n) > 1})
        if repeated:
            problems.append(f"named twice: {repeated}")
        if problems:
            raise ValueError(f"register_dataclass({_full_type_name(cls)}): "
                             + "; ".join(problems))
    data, meta = tuple(data_fields), tuple(meta_fields)

    # aux data: the data fields' names (shown in the spec's repr), and with meta fields
    # their (name, value) pairs too, so that trees whose static data differ differ in structure
    if meta:
        def flatten(obj):
            return [getattr(obj, n) for n in data], (data, tuple([(n, getattr(obj, n))
                                                                  for n in meta]))

        def unflatten(aux, children):
            return cls(**dict(zip(data, children)), **dict(aux[1]))
    else:
        def flatten(obj):
            return [getattr(obj, n) for n in data], data

        def unflatten(aux, children):
            return cls(**dict(zip(data, children)))

    def flatten_with_keys(obj):
        children, aux = flatten(obj)
        return [(GetAttrKey(n), c) for n, c in zip(data, children)], aux

    _register(cls, flatten, unflatten, "custom", flatten_with_keys)
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


def _sequence_flatten_with_keys(obj):
    return [(SequenceKey(i), c) for i, c in enumerate(obj)], None


def _dict_flatten_with_keys(obj):
    return [(DictKey(k), v) for k, v in obj.items()], tuple(obj)


_register(tuple, _tuple_flatten, _tuple_unflatten, "tuple", _sequence_flatten_with_keys)
_register(list, _list_flatten, _list_unflatten, "list", _sequence_flatten_with_keys)
_register(dict, _dict_flatten, _dict_unflatten, "dict", _dict_flatten_with_keys)
_register(OrderedDict, _dict_flatten, _odict_unflatten, "dict", _dict_flatten_with_keys)
_DISPATCH[type(None)] = None


# ---------------------------------------------------------------------------
# TreeSpec
# ---------------------------------------------------------------------------


class TreeSpec:
    """Immutable description of a pytree's structure (torch's ``TreeSpec``, JAX's
    ``PyTreeDef``).

    Attributes (read-only): ``type`` (node type, ``None`` for a leaf),
    ``aux_data``, ``children_specs`` (tuple of ``TreeSpec``), ``num_children``
    and ``num_leaves``.  Equality and hashing are structural.  Immutability
    is by construction: the public attributes are read-only properties and
    ``__slots__`` forbids new ones.

    Raises
    ------
    TypeError
        When built directly for a type that is not a registered node, or with children that
        are not ``TreeSpec`` objects.
    ValueError
        When a leaf spec is given aux data or children.

    Examples
    --------
    >>> from arrayad.tree_util import tree_structure
    >>> spec = tree_structure({"w": 1.0, "b": (2.0, 3.0)})
    >>> spec.num_leaves, spec.num_children
    (3, 2)
    >>> spec.unflatten([10.0, 20.0, 30.0])
    {'w': 10.0, 'b': (20.0, 30.0)}
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
    """The leaves of ``tree``, in :func:`tree_flatten`'s order (depth first).

    Parameters
    ----------
    tree : object
        A pytree.
    is_leaf : callable, optional
        ``is_leaf(x) -> bool``: a subtree for which it returns true is a leaf.

    Returns
    -------
    list
        The leaves. ``None`` is a leaf (as in torch; JAX's ``None`` is a node with no
        children), and dicts are walked in insertion order (JAX sorts their keys).

    Raises
    ------
    Exception
        Nothing of its own: an error of a registered flatten function or of ``is_leaf``
        propagates.

    Examples
    --------
    >>> from arrayad.tree_util import tree_leaves
    >>> tree_leaves({"w": [1.0, 2.0], "b": (3.0, None)})
    [1.0, 2.0, 3.0, None]
    """
    if (is_leaf is not None and is_leaf(tree)) or _node_of(tree) is None:
        return [tree]
    leaves = []
    _collect_leaves(tree, leaves, is_leaf)
    return leaves


def tree_structure(tree, is_leaf=None) -> TreeSpec:
    """The structure of ``tree`` (its :class:`TreeSpec`), without its leaves.

    Parameters
    ----------
    tree : object
        A pytree.
    is_leaf : callable, optional
        As in :func:`tree_flatten`.

    Returns
    -------
    TreeSpec
        Equal for two trees exactly when they have the same node types, aux data (dict
        keys in order, registered classes' static data) and arrangement.

    Raises
    ------
    Exception
        Nothing of its own: an error of a registered flatten function or of ``is_leaf``
        propagates.

    Examples
    --------
    >>> from arrayad.tree_util import tree_structure
    >>> tree_structure({"w": np.ones(3), "b": (1.0, 2.0)})
    TreeSpec(dict, ['w', 'b'], [*, TreeSpec(tuple, [*, *])])
    >>> tree_structure([1.0, 2.0]) == tree_structure([np.ones(2), np.zeros(3)])
    True
    """
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

    The arguments are in torch's order; JAX's, ``tree_unflatten(spec, leaves)``, is accepted
    too (a ``TreeSpec`` is never a list of leaves, so the two cannot be confused).

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
        if isinstance(leaves, TreeSpec):   # JAX's order: (treedef, leaves)
            leaves, spec = spec, leaves
        else:
            raise TypeError(f"tree_unflatten(leaves, spec): spec must be a TreeSpec (from "
                            f"tree_flatten or tree_structure), got {type(spec).__name__}")
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
    """Apply ``fn`` leafwise: ``fn(leaf, *matching subtrees of rest)``.

    Parameters
    ----------
    fn : callable
        Called once per leaf, with the leaf of ``tree`` and what stands at the same place in
        each tree of ``rest``.
    tree : object
        A pytree: its structure is the result's.
    *rest
        Pytrees with the structure of ``tree``, or with ``tree``'s structure as a prefix (a
        leaf of ``tree`` may stand where one of them has a subtree: ``fn`` gets the
        subtree), as in JAX and torch. Dicts are matched by key, whatever their order.
    is_leaf : callable, optional
        As in ``tree_flatten``, for ``tree``.

    Returns
    -------
    object
        A tree with the structure of ``tree`` and the results of ``fn`` as leaves.

    Raises
    ------
    ValueError
        If a tree in ``rest`` does not have ``tree``'s structure as a prefix: the message
        names the place (a key path) and both structures.

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
    columns = [_leaves_up_to(spec, other, i, "tree_map(f, tree, *rest)", is_leaf)
               for i, other in enumerate(rest)]
    return tree_unflatten([fn(*xs) for xs in zip(leaves, *columns)], spec)


def _leaves_up_to(spec, other, index, api, is_leaf=None):
    """The subtrees of ``other`` at the leaves of ``spec`` (``rest[index]`` of ``api``)."""
    other_leaves, other_spec = tree_flatten(other, is_leaf)
    if other_spec == spec:   # (the common case: the same structure)
        return other_leaves
    out = []
    try:
        _up_to(spec, other, (), out, f"rest[{index}]")
    except _PrefixMismatch as e:
        raise ValueError(
            f"{api}: rest[{index}] does not have the structure of tree: at "
            f"{keystr(e.path) or 'the root'} {e.reason}. tree has structure {spec!r}; "
            f"rest[{index}] has structure {other_spec!r}. Pass trees of the same structure "
            f"(or with tree's structure as a prefix)."
        ) from None
    return out


def _child_key(node, i):
    if node.kind == "namedtuple":
        return GetAttrKey(node.type._fields[i])
    if node.kind in ("tuple", "list"):
        return SequenceKey(i)
    return FlattenedIndexKey(i)


def _up_to(spec, x, path, out, who):
    if spec is LEAF or spec._type is None:
        out.append(x)
        return
    node = _node_of(x)
    want = _type_name(spec._type)
    if node is None:
        raise _PrefixMismatch(path, f"tree has a {want} node where {who} has a leaf of type "
                                    f"{_type_name(type(x))}")
    if node.type is not spec._type:
        raise _PrefixMismatch(path, f"tree has a {want} node where {who} has a "
                                    f"{_type_name(node.type)} node")
    children, aux = (x, None) if node.direct else node.flatten(x)
    children = list(children)
    if node.kind == "dict":
        if set(aux) != set(spec._aux) or len(aux) != len(spec._aux):
            missing = [k for k in spec._aux if k not in aux]
            extra = [k for k in aux if k not in spec._aux]
            raise _PrefixMismatch(path, f"tree's dict has keys {list(spec._aux)!r} where "
                                        f"{who} has keys {list(aux)!r} (missing {missing!r}, extra "
                                        f"{extra!r})")
        by_key = dict(zip(aux, children))
        for k, c in zip(spec._aux, spec._children):
            _up_to(c, by_key[k], path + (DictKey(k),), out, who)
        return
    if len(children) != len(spec._children):
        raise _PrefixMismatch(path, f"tree's {want} has {len(spec._children)} children where "
                                    f"{who} has {len(children)}")
    if aux != spec._aux:
        raise _PrefixMismatch(path, f"tree's {want} has aux data {spec._aux!r} where {who} has "
                                    f"{aux!r}")
    for i, (c, cspec) in enumerate(zip(children, spec._children)):
        _up_to(cspec, c, path + (_child_key(node, i),), out, who)


# ---------------------------------------------------------------------------
# Key paths
# ---------------------------------------------------------------------------


def _with_path(x, path, out, is_leaf):
    if is_leaf is not None and is_leaf(x):
        out.append((path, x))
        return
    node = _node_of(x)
    if node is None:
        out.append((path, x))
        return
    for k, c in node.flatten_with_keys(x)[0]:
        _with_path(c, path + (k,), out, is_leaf)


def tree_flatten_with_path(tree, is_leaf=None):
    """``tree_flatten`` with the key path of each leaf: ``([(path, leaf), ...], spec)``.

    A path is a tuple of key entries from the root: ``SequenceKey(i)`` in tuples and lists,
    ``DictKey(k)`` in dicts, ``GetAttrKey(name)`` in namedtuples and dataclasses, the keys
    of a node registered with ``flatten_with_keys_fn``, else ``FlattenedIndexKey(i)``.
    ``keystr(path)`` writes it as JAX does: ``"['w'][0]"``.

    Parameters
    ----------
    tree : object
        A pytree.
    is_leaf : callable, optional
        As in ``tree_flatten``.

    Returns
    -------
    pairs : list of (tuple, object)
        Each leaf with its path, in ``tree_flatten``'s order.
    spec : TreeSpec
        The structure, as ``tree_flatten`` gives it.

    Raises
    ------
    ValueError
        If a registered ``flatten_with_keys_fn`` gives another number of children than the
        type's ``flatten_fn``.

    Examples
    --------
    >>> from arrayad.tree_util import keystr, tree_flatten_with_path
    >>> pairs, spec = tree_flatten_with_path({"w": np.ones(2), "b": (1.0, 2.0)})
    >>> [keystr(path) for path, _ in pairs]
    ["['w']", "['b'][0]", "['b'][1]"]
    >>> pairs[1][0]
    (DictKey(key='b'), SequenceKey(idx=0))
    """
    out = []
    _with_path(tree, (), out, is_leaf)
    spec = tree_structure(tree, is_leaf)
    if len(out) != spec._num_leaves:
        raise ValueError(
            f"tree_flatten_with_path: the keyed flatten functions gave {len(out)} leaves but "
            f"the flatten functions {spec._num_leaves}, for structure {spec!r}: a registered "
            f"flatten_with_keys_fn must give the children of its flatten_fn, in order"
        )
    return out, spec


def tree_leaves_with_path(tree, is_leaf=None) -> list:
    """The leaves of ``tree`` with their key paths: ``[(path, leaf), ...]``.

    Parameters
    ----------
    tree : object
        A pytree.
    is_leaf : callable, optional
        As in ``tree_flatten``.

    Returns
    -------
    list of (tuple, object)
        As the first result of :func:`tree_flatten_with_path`.

    Raises
    ------
    ValueError
        As :func:`tree_flatten_with_path`.

    Examples
    --------
    >>> from arrayad.tree_util import keystr, tree_leaves_with_path
    >>> [(keystr(p), x) for p, x in tree_leaves_with_path([1.0, {"a": 2.0}])]
    [('[0]', 1.0), ("[1]['a']", 2.0)]
    """
    return tree_flatten_with_path(tree, is_leaf)[0]


def tree_map_with_path(fn, tree, *rest, is_leaf=None):
    """``tree_map`` that also hands ``fn`` each leaf's key path: ``fn(path, leaf, *others)``.

    Parameters
    ----------
    fn : callable
        Called once per leaf of ``tree`` with its path (a tuple of key entries, see
        :func:`tree_flatten_with_path`), the leaf and what stands at the same place in each
        tree of ``rest``.
    tree : object
        A pytree: its structure is the result's.
    *rest
        Pytrees with ``tree``'s structure (or with it as a prefix), as in :func:`tree_map`.
    is_leaf : callable, optional
        As in ``tree_flatten``, for ``tree``.

    Returns
    -------
    object
        A tree with the structure of ``tree`` and the results of ``fn`` as leaves.

    Raises
    ------
    ValueError
        If a tree in ``rest`` does not match ``tree``'s structure (naming the place and both
        structures).

    Examples
    --------
    Weight decay on the weights only:

    >>> from arrayad.tree_util import keystr, tree_map_with_path
    >>> params = {"w": 1.0, "b": 2.0}
    >>> tree_map_with_path(lambda path, p: p * 0.9 if keystr(path) == "['w']" else p, params)
    {'w': 0.9, 'b': 2.0}
    """
    pairs, spec = tree_flatten_with_path(tree, is_leaf)
    columns = [_leaves_up_to(spec, other, i, "tree_map_with_path(f, tree, *rest)", is_leaf)
               for i, other in enumerate(rest)]
    return tree_unflatten([fn(path, x, *xs) for (path, x), *xs in zip(pairs, *columns)], spec)


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
