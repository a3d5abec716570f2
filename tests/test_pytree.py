"""Tests for arrayad._pytree."""

import copy
import dataclasses
import importlib.util
import os
import pickle
import sys
from collections import OrderedDict, namedtuple

import pytest

try:
    from arrayad import _pytree as pt
except ImportError:  # package not importable yet: load the module by path
    _path = os.path.join(os.path.dirname(__file__), os.pardir, "arrayad", "_pytree.py")
    _spec = importlib.util.spec_from_file_location("arrayad_pytree_standalone", _path)
    pt = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = pt  # so that pickle can find the module's names
    _spec.loader.exec_module(pt)

LEAF = pt.LEAF
TreeSpec = pt.TreeSpec
tree_flatten = pt.tree_flatten
tree_unflatten = pt.tree_unflatten
tree_leaves = pt.tree_leaves
tree_structure = pt.tree_structure
tree_map = pt.tree_map
broadcast_prefix = pt.broadcast_prefix

Point = namedtuple("Point", ["x", "y"])
Triple = namedtuple("Triple", ["a", "b", "c"])


class Leafy:
    """An unregistered class: always a leaf."""

    def __init__(self, v):
        self.v = v


@dataclasses.dataclass
class Params:
    w: object
    b: object
    n: int = dataclasses.field(default=0, init=False)

    def __post_init__(self):
        self.n = 7


pt.register_dataclass(Params)


@pt.register_dataclass
@dataclasses.dataclass(frozen=True)
class Pair:
    first: object
    second: object


class Box:
    """A custom registered node with aux data."""

    def __init__(self, label, items):
        self.label = label
        self.items = list(items)

    def __eq__(self, other):
        return type(other) is Box and self.label == other.label and self.items == other.items


pt.register_pytree_node(Box, lambda b: (b.items, b.label), lambda aux, ch: Box(aux, ch))


def roundtrip(tree, **kw):
    leaves, spec = tree_flatten(tree, **kw)
    rebuilt = tree_unflatten(leaves, spec)
    assert rebuilt == tree
    assert type(rebuilt) is type(tree)
    assert spec.num_leaves == len(leaves)
    assert tree_leaves(tree, **kw) == leaves
    assert tree_structure(tree, **kw) == spec
    assert spec.unflatten(leaves) == tree
    return leaves, spec


# ---------------------------------------------------------------------------
# flatten / unflatten
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tree, expected",
    [
        ((1, 2, 3), [1, 2, 3]),
        ([1, 2, 3], [1, 2, 3]),
        ({"a": 1, "b": 2}, [1, 2]),
        ({"b": 2, "a": 1}, [2, 1]),
        (OrderedDict([("z", 1), ("y", 2)]), [1, 2]),
        (Point(1, 2), [1, 2]),
        ((), []),
        ([], []),
        ({}, []),
        (5, [5]),
        ("abc", ["abc"]),
    ],
)
def test_roundtrip_containers(tree, expected):
    leaves, _ = roundtrip(tree)
    assert leaves == expected


def test_roundtrip_nested_mix():
    tree = (
        1,
        [2, (3, 4), {"k": [5, 6]}],
        {"x": Point(7, [8, 9]), "y": OrderedDict(p=10, q=(11,))},
        Params(12, (13, 14)),
        Box("lbl", [15, {"z": 16}]),
        (),
    )
    leaves, spec = roundtrip(tree)
    assert leaves == list(range(1, 17))
    doubled = tree_unflatten([2 * x for x in leaves], spec)
    assert doubled[2]["x"] == Point(14, [16, 18])
    assert isinstance(doubled[2]["y"], OrderedDict)
    assert doubled[3] == Params(24, (26, 28))
    assert doubled[4] == Box("lbl", [30, {"z": 32}])


def test_none_is_a_leaf():
    leaves, spec = roundtrip((None, [1, None], {"a": None}))
    assert leaves == [None, 1, None, None]
    assert spec.num_leaves == 4
    leaves, spec = tree_flatten(None)
    assert leaves == [None] and spec is LEAF
    assert tree_unflatten([3], spec) == 3


def test_unregistered_and_subclasses_are_leaves():
    class MyList(list):
        pass

    class MyDict(dict):
        pass

    class MyTuple(tuple):
        pass

    obj = Leafy(1)
    for x in (obj, MyList([1, 2]), MyDict(a=1), MyTuple((1, 2)), 1.5, "s", b"b"):
        leaves, spec = tree_flatten(x)
        assert leaves == [x] and leaves[0] is x
        assert spec is LEAF


def test_flatten_order_is_depth_first():
    tree = [[1, [2, 3]], 4, ((5,), 6)]
    assert tree_leaves(tree) == [1, 2, 3, 4, 5, 6]


def test_unflatten_accepts_any_iterable():
    spec = tree_structure((0, [0, 0]))
    assert tree_unflatten(iter([1, 2, 3]), spec) == (1, [2, 3])
    assert tree_unflatten((1, 2, 3), spec) == (1, [2, 3])


def test_unflatten_leaf_count_error():
    spec = tree_structure((0, [0, 0]))
    with pytest.raises(ValueError) as e:
        tree_unflatten([1, 2], spec)
    msg = str(e.value)
    assert "3" in msg and "2" in msg
    with pytest.raises(ValueError):
        tree_unflatten([1, 2, 3, 4], spec)
    with pytest.raises(ValueError):
        tree_unflatten([], LEAF)


def test_unflatten_returns_fresh_containers():
    leaves, spec = tree_flatten([1, 2])
    a = tree_unflatten(leaves, spec)
    b = tree_unflatten(leaves, spec)
    assert a == b and a is not b and a is not leaves


def test_namedtuple():
    tree = Triple(1, Point(2, 3), [4])
    leaves, spec = roundtrip(tree)
    assert leaves == [1, 2, 3, 4]
    assert spec.type is Triple
    assert spec != tree_structure((1, (2, 3), [4]))
    assert spec != tree_structure(Triple(1, (2, 3), [4]))


def test_dataclass():
    p = Params(w=[1, 2], b=3)
    leaves, spec = roundtrip(p)
    assert leaves == [1, 2, 3]
    assert spec.type is Params
    assert spec.aux_data == ("w", "b")  # init=False field is not a child
    q = tree_unflatten([10, 20, 30], spec)
    assert q.w == [10, 20] and q.b == 30 and q.n == 7
    assert roundtrip(Pair(1, (2, 3)))[0] == [1, 2, 3]


def test_register_dataclass_returns_cls_and_rejects_non_dataclass():
    @dataclasses.dataclass
    class D:
        a: object

    assert pt.register_dataclass(D) is D

    class NotDC:
        pass

    with pytest.raises(TypeError, match="dataclass"):
        pt.register_dataclass(NotDC)
    with pytest.raises(TypeError, match="dataclass"):
        pt.register_dataclass(Params(1, 2))  # an instance, not a class


def test_custom_registered_node():
    b = Box("hello", [1, (2, 3)])
    leaves, spec = roundtrip(b)
    assert leaves == [1, 2, 3]
    assert spec.aux_data == "hello"
    assert spec != tree_structure(Box("other", [1, (2, 3)]))
    assert "Box" in repr(spec) and "'hello'" in repr(spec)


def test_custom_node_with_generator_children():
    class Gen:
        def __init__(self, *xs):
            self.xs = xs

    pt.register_pytree_node(Gen, lambda g: ((x for x in g.xs), None), lambda _, ch: Gen(*ch))
    leaves, spec = tree_flatten(Gen(1, [2, 3]))
    assert leaves == [1, 2, 3]
    assert tree_unflatten([4, 5, 6], spec).xs == (4, [5, 6])


def test_double_registration_error():
    class Once:
        pass

    pt.register_pytree_node(Once, lambda o: ((), None), lambda aux, ch: Once())
    with pytest.raises(ValueError, match="Once"):
        pt.register_pytree_node(Once, lambda o: ((), None), lambda aux, ch: Once())
    with pytest.raises(ValueError, match="Params"):
        pt.register_dataclass(Params)
    with pytest.raises(ValueError, match="tuple"):
        pt.register_pytree_node(tuple, lambda t: (t, None), lambda aux, ch: tuple(ch))


def test_registration_after_use_takes_effect():
    class Late:
        def __init__(self, v):
            self.v = v

    x = Late(1)
    assert tree_leaves([x]) == [x]  # a leaf, cached as such
    pt.register_pytree_node(Late, lambda o: ([o.v], None), lambda aux, ch: Late(*ch))
    assert tree_leaves([x]) == [1]


def test_is_leaf():
    tree = {"a": (1, 2), "b": [(3, 4), 5]}
    is_pair = lambda x: isinstance(x, tuple)  # noqa: E731
    leaves, spec = tree_flatten(tree, is_leaf=is_pair)
    assert leaves == [(1, 2), (3, 4), 5]
    assert spec.num_leaves == 3
    assert tree_unflatten(leaves, spec) == tree
    assert tree_leaves(tree, is_leaf=is_pair) == leaves
    assert tree_structure(tree, is_leaf=is_pair) == spec
    # is_leaf on the root
    assert tree_flatten(tree, is_leaf=lambda x: True)[0] == [tree]
    # is_leaf can turn an unregistered object... still a leaf
    assert tree_leaves([Leafy(1)], is_leaf=lambda x: False)[0].v == 1


# ---------------------------------------------------------------------------
# TreeSpec
# ---------------------------------------------------------------------------


def test_spec_equality_and_hash():
    s1 = tree_structure((1, {"a": 2, "b": [3]}))
    s2 = tree_structure(("x", {"a": None, "b": ["y"]}))
    assert s1 == s2 and hash(s1) == hash(s2)
    assert len({s1, s2}) == 1
    assert s1 != tree_structure((1, {"a": 2, "b": (3,)}))
    assert s1 != tree_structure([1, {"a": 2, "b": [3]}])
    assert s1 != tree_structure((1, {"a": 2, "c": [3]}))
    assert s1 != tree_structure((1, {"a": 2, "b": [3, 4]}))
    assert s1 != "not a spec"
    # key order matters for dicts
    assert tree_structure({"a": 1, "b": 2}) != tree_structure({"b": 2, "a": 1})
    # dict and OrderedDict differ
    assert tree_structure({"a": 1}) != tree_structure(OrderedDict(a=1))
    # a leaf spec differs from an empty node
    assert LEAF != tree_structure(())
    assert tree_structure(()) != tree_structure([])


def test_spec_repr():
    spec = tree_structure((1, {"a": 2, "b": 3}))
    assert repr(spec) == "TreeSpec(tuple, [*, TreeSpec(dict, ['a', 'b'], [*, *])])"
    assert repr(tree_structure([Point(1, 2), None])) == "TreeSpec(list, [TreeSpec(Point, [*, *]), *])"
    assert repr(tree_structure(())) == "TreeSpec(tuple, [])"
    assert repr(LEAF) == "TreeSpec(*)"


def test_spec_attributes_and_immutability():
    spec = tree_structure({"a": 1, "b": (2, 3)})
    assert spec.type is dict
    assert spec.aux_data == ("a", "b")
    assert spec.num_children == 2
    assert spec.num_leaves == 3
    assert spec.children_specs[0] is LEAF
    assert spec.children_specs[1] == tree_structure((0, 0))
    assert not spec.is_leaf() and LEAF.is_leaf()
    assert LEAF.num_leaves == 1
    with pytest.raises(AttributeError):
        spec.type = list
    with pytest.raises(AttributeError):
        spec.num_leaves = 5
    with pytest.raises(AttributeError):
        spec.new_attr = 1


def test_spec_public_constructor():
    spec = TreeSpec(tuple, None, [LEAF, TreeSpec(dict, ("a",), [TreeSpec(None)])])
    assert spec == tree_structure((1, {"a": 2}))
    assert tree_unflatten([1, 2], spec) == (1, {"a": 2})
    with pytest.raises(TypeError):
        TreeSpec(Leafy, None, [])


def test_spec_pickle_and_copy():
    spec = tree_structure((1, [2, {"a": Point(3, 4)}], OrderedDict(z=5)))
    for s in (pickle.loads(pickle.dumps(spec)), copy.deepcopy(spec), copy.copy(spec)):
        assert s == spec and hash(s) == hash(spec)
        assert tree_unflatten(range(5), s) == (0, [1, {"a": Point(2, 3)}], OrderedDict(z=4))
    assert pickle.loads(pickle.dumps(LEAF)) is LEAF


def test_flat_specs_are_shared():
    # Same-shaped flat tuples get the same spec object (cheap comparisons).
    assert tree_structure((1, 2)) is tree_structure(("a", "b"))


# ---------------------------------------------------------------------------
# tree_map
# ---------------------------------------------------------------------------


def test_tree_map_single():
    tree = {"a": [1, 2], "b": (3, None)}
    out = tree_map(lambda x: None if x is None else x * 10, tree)
    assert out == {"a": [10, 20], "b": (30, None)}


def test_tree_map_several_trees():
    a = (1, {"k": [2, 3]}, Point(4, 5))
    b = (10, {"k": [20, 30]}, Point(40, 50))
    c = (100, {"k": [200, 300]}, Point(400, 500))
    assert tree_map(lambda x, y, z: x + y + z, a, b, c) == (111, {"k": [222, 333]}, Point(444, 555))


def test_tree_map_is_leaf():
    tree = [(1, 2), (3, 4)]
    assert tree_map(sum, tree, is_leaf=lambda x: isinstance(x, tuple)) == [3, 7]
    assert tree_map(lambda p, q: p + q, tree, [(5,), (6,)], is_leaf=lambda x: isinstance(x, tuple)) == [
        (1, 2, 5),
        (3, 4, 6),
    ]


def test_tree_map_structure_mismatch():
    with pytest.raises(ValueError) as e:
        tree_map(lambda x, y: x + y, (1, [2, 3]), (1, [2]))
    msg = str(e.value)
    assert "TreeSpec(tuple, [*, TreeSpec(list, [*, *])])" in msg
    assert "TreeSpec(tuple, [*, TreeSpec(list, [*])])" in msg
    assert "at [1] tree's list has 2 children where rest[0] has 1" in msg
    with pytest.raises(ValueError, match="tuple node where rest.0. has a list node"):
        tree_map(lambda x, y: x, (1, 2), [1, 2])
    with pytest.raises(ValueError, match=r"at \['a'\] tree has a tuple node where rest\[1\] "
                                         r"has a leaf of type int"):
        tree_map(lambda x, y, z: x, {"a": (1,)}, {"a": (1,)}, {"a": 2})


def test_tree_map_matches_the_rest_up_to_the_first_trees_leaves():
    # As JAX's and torch's tree_map: dicts by key, a leaf of the first tree takes a subtree
    assert tree_map(lambda x, y: (x, y), {"a": 1, "b": 2}, {"b": 3, "a": 4}) == \
        {"a": (1, 4), "b": (2, 3)}
    assert tree_map(lambda x, y: (x, y), (1, 2), (1, (2,))) == ((1, 1), (2, (2,)))


# ---------------------------------------------------------------------------
# broadcast_prefix
# ---------------------------------------------------------------------------


def test_broadcast_int_prefix_over_nested_tree():
    tree = (1, [2, {"a": 3, "b": (4, 5)}])
    assert broadcast_prefix(0, tree) == [0] * 5
    assert broadcast_prefix(None, tree) == [None] * 5
    assert broadcast_prefix(2, 7) == [2]
    assert broadcast_prefix(0, ()) == []


def test_broadcast_tuple_prefix_with_none():
    args = (1, (2, 3), {"x": 4})
    assert broadcast_prefix((0, None, 1), args) == [0, None, None, 1]
    assert broadcast_prefix((None, 1, None), args) == [None, 1, 1, None]


def test_broadcast_nested_prefix():
    tree = (1, [2, {"a": 3, "b": (4, 5)}], Point(6, [7, 8]))
    prefix = (0, [1, {"b": (None, 2), "a": 3}], Point(4, None))
    assert broadcast_prefix(prefix, tree) == [0, 1, 3, None, 2, 4, None, None]
    # dict prefix keys in a different order are matched by name
    assert broadcast_prefix({"b": 1, "a": 0}, {"a": (1, 2), "b": 3}) == [0, 0, 1]


def test_broadcast_tuple_prefix_matches_namedtuple():
    assert broadcast_prefix((0, None), Point(1, [2, 3])) == [0, None, None]
    assert broadcast_prefix(((1, 0),), (Point(1, 2),)) == [1, 0]
    with pytest.raises(ValueError):
        broadcast_prefix((0, 1, 2), Point(1, 2))
    # but not the other way round, nor a list for a tuple
    with pytest.raises(ValueError):
        broadcast_prefix(Point(0, 1), (1, 2))
    with pytest.raises(ValueError):
        broadcast_prefix([0, 1], (1, 2))


def test_broadcast_mismatched_structure_error():
    with pytest.raises(ValueError) as e:
        broadcast_prefix((0, 1), (1, 2, 3))
    msg = str(e.value)
    assert "prefix has structure TreeSpec(tuple, [*, *]) but tree has structure TreeSpec(tuple, [*, *, *])" in msg
    # prefix deeper than the tree
    with pytest.raises(ValueError) as e:
        broadcast_prefix((0, (1, 2)), (1, 2))
    assert "TreeSpec(tuple, [*, TreeSpec(tuple, [*, *])])" in str(e.value)
    # node type mismatch deep inside, path reported
    with pytest.raises(ValueError) as e:
        broadcast_prefix((0, [1, 2]), (1, (2, 3)))
    assert "[1]" in str(e.value)


def test_broadcast_dict_key_mismatch_error():
    with pytest.raises(ValueError) as e:
        broadcast_prefix({"a": 0, "c": 1}, {"a": 1, "b": 2})
    msg = str(e.value)
    assert "prefix has structure TreeSpec(dict, ['a', 'c'], [*, *])" in msg
    assert "tree has structure TreeSpec(dict, ['a', 'b'], [*, *])" in msg
    with pytest.raises(ValueError):
        broadcast_prefix({"a": 0}, {"a": 1, "b": 2})
    with pytest.raises(ValueError):
        broadcast_prefix({"a": 0}, OrderedDict(a=1))


def test_broadcast_custom_nodes():
    tree = Box("l", [1, (2, 3)])
    assert broadcast_prefix(Box("l", [0, None]), tree) == [0, None, None]
    with pytest.raises(ValueError):
        broadcast_prefix(Box("other", [0, None]), tree)
    assert broadcast_prefix(Params(0, None), Params((1, 2), 3)) == [0, 0, None]


def test_broadcast_with_is_leaf():
    is_pair = lambda x: isinstance(x, tuple)  # noqa: E731
    tree = [(1, 2), 3]
    assert broadcast_prefix([0, 1], tree, is_leaf=is_pair) == [0, 1]
    assert broadcast_prefix(5, tree, is_leaf=is_pair) == [5, 5]
    # a prefix value for which is_leaf holds is a single prefix leaf
    assert broadcast_prefix([(0, 0), 1], [[1, 2], 3], is_leaf=is_pair) == [(0, 0), (0, 0), 1]


def test_all_names_exported():
    for name in pt.__all__:
        assert hasattr(pt, name)
    assert set(pt.__all__) >= {
        "TreeSpec",
        "LEAF",
        "register_pytree_node",
        "register_dataclass",
        "tree_flatten",
        "tree_unflatten",
        "tree_leaves",
        "tree_structure",
        "tree_map",
        "broadcast_prefix",
    }
