"""Pytree utilities: ``jax.tree_util``'s names on the pytrees every arrayad transform uses.

A pytree is a nest of tuples, lists, dicts, namedtuples and registered classes (dataclasses,
``register_pytree_node``) whose other values are its leaves. This module is the public face of
``arrayad._pytree`` (the one implementation the transforms flatten their arguments with): what
``tree_map`` walks is what ``grad`` differentiates and ``vmap`` batches.

Two choices differ from JAX and follow torch's ``torch.utils._pytree`` (and arrayad's
transforms): ``None`` is a leaf (in JAX a node without children), and a dict is walked in
insertion order (JAX sorts its keys). ``docs/tree_util.md`` maps JAX's and torch's names to
these.
"""

import functools

from ._pytree import (DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey, TreeSpec, keystr,
                      register_dataclass, register_pytree_node, register_pytree_node_class,
                      register_pytree_with_keys, tree_flatten, tree_flatten_with_path,
                      tree_leaves, tree_leaves_with_path, tree_map, tree_map_with_path,
                      tree_structure, tree_unflatten)

__all__ = ["DictKey", "FlattenedIndexKey", "GetAttrKey", "SequenceKey", "TreeSpec", "keystr",
           "register_dataclass", "register_pytree_node", "register_pytree_node_class",
           "register_pytree_with_keys", "tree_all", "tree_flatten", "tree_flatten_with_path",
           "tree_leaves", "tree_leaves_with_path", "tree_map", "tree_map_with_path",
           "tree_reduce", "tree_structure", "tree_unflatten"]


def tree_all(*args, is_leaf=None):
    """Whether every leaf is true: ``tree_all(tree)`` (JAX's) or ``tree_all(pred, tree)``
    (torch's: whether ``pred`` holds for every leaf).

    Parameters
    ----------
    *args
        ``(tree,)`` or ``(pred, tree)``: a pytree, and optionally a predicate of one leaf.
    is_leaf : callable, optional
        As in ``tree_flatten``.

    Returns
    -------
    bool
        True for a tree without leaves.

    Raises
    ------
    TypeError
        If given neither one nor two positional arguments, or (torch's form) a ``pred`` that
        is not callable. A leaf whose truth is ambiguous (an array of several elements)
        raises its own error: reduce it first (``tree_map(ad.all, tree)``).

    Examples
    --------
    >>> from arrayad.tree_util import tree_all
    >>> tree_all({"a": True, "b": [1, 2]})
    True
    >>> tree_all(lambda x: x > 0, {"a": 1.0, "b": [2.0, -1.0]})
    False
    """
    if len(args) == 1:
        return all(tree_leaves(args[0], is_leaf))
    if len(args) == 2:
        pred, tree = args
        if not callable(pred):
            raise TypeError(f"tree_all(pred, tree): pred must be a function of a leaf, got "
                            f"{type(pred).__name__}; for JAX's form pass the tree alone: "
                            f"tree_all(tree)")
        return all(pred(x) for x in tree_leaves(tree, is_leaf))
    raise TypeError(f"tree_all takes tree_all(tree) (JAX's) or tree_all(pred, tree) (torch's), "
                    f"got {len(args)} positional arguments")


_NO_INITIALIZER = object()


def tree_reduce(function, tree, initializer=_NO_INITIALIZER, is_leaf=None):
    """Fold the leaves with ``function``: ``functools.reduce(function, tree_leaves(tree))``.

    Parameters
    ----------
    function : callable
        ``function(accumulated, leaf) -> accumulated``.
    tree : object
        A pytree.
    initializer : object, optional
        The starting value (required when the tree may have no leaves).
    is_leaf : callable, optional
        As in ``tree_flatten``.

    Returns
    -------
    object
        The folded value.

    Raises
    ------
    TypeError
        If the tree has no leaves and no ``initializer`` is given.

    Examples
    --------
    The total number of elements of a dict of parameters:

    >>> from arrayad.tree_util import tree_map, tree_reduce
    >>> params = {"w": np.ones((3, 2)), "b": np.zeros(2)}
    >>> tree_reduce(lambda n, size: n + size, tree_map(lambda p: p.size, params))
    8
    """
    leaves = tree_leaves(tree, is_leaf)
    if initializer is not _NO_INITIALIZER:
        return functools.reduce(function, leaves, initializer)
    if not leaves:
        raise TypeError("tree_reduce(function, tree): the tree has no leaves; pass an "
                        "initializer (tree_reduce(function, tree, initializer)) for the "
                        "result of an empty tree")
    return functools.reduce(function, leaves)
