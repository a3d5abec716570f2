"""arrayad.tree_util against jax.tree_util: leaves in the same order, the same key paths (as
``keystr`` writes them), the same verdicts on which structures are equal, and registered nodes
through grad, vmap and jit. Where arrayad follows torch instead (``None`` is a leaf, dicts keep
their insertion order), the test says so and checks torch's ``torch.utils._pytree``."""

import collections
import dataclasses

import numpy as np
import pytest

import arrayad as ad
from arrayad import tree_util as tu
from arrayad.func import grad, vmap

jtu = pytest.importorskip("jax.tree_util")

Point = collections.namedtuple("Point", "x y")


@dataclasses.dataclass
class Layer:
    w: object
    b: object
    name: str = dataclasses.field(default="dense", metadata={"static": True})


tu.register_dataclass(Layer)
jtu.register_dataclass(Layer, data_fields=["w", "b"], meta_fields=["name"])


class Pair:
    """A registered class without keys of its own (FlattenedIndexKey in both libraries)."""

    def __init__(self, first, second, tag="t"):
        self.first, self.second, self.tag = first, second, tag

    def __eq__(self, other):
        return (type(other) is Pair and (self.first, self.second, self.tag)
                == (other.first, other.second, other.tag))


def _pair_flatten(p):
    return (p.first, p.second), p.tag


def _pair_unflatten(tag, children):
    return Pair(*children, tag=tag)


tu.register_pytree_node(Pair, _pair_flatten, _pair_unflatten)
jtu.register_pytree_node(Pair, _pair_flatten, _pair_unflatten)


class Named:
    """A registered class with keys (GetAttrKey), by either library's keyed registration."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __eq__(self, other):
        return type(other) is Named and (self.a, self.b) == (other.a, other.b)


def _named_keys(n, key):
    return ((key("a"), n.a), (key("b"), n.b)), None


tu.register_pytree_with_keys(Named, lambda n: _named_keys(n, tu.GetAttrKey),
                             lambda _, ch: Named(*ch))
jtu.register_pytree_with_keys(Named, lambda n: _named_keys(n, jtu.GetAttrKey),
                              lambda _, ch: Named(*ch))

# Trees on which the two libraries agree: sorted dict keys, no None.
TREES = {
    "leaf": 1.0,
    "tuple": (1.0, 2.0, (3.0,)),
    "list": [1.0, [2.0, [3.0, 4.0]]],
    "sorted dict": {"a": 1.0, "b": {"c": 2.0, "d": [3.0]}},
    "int dict keys": {0: 1.0, 1: 2.0, 2: (3.0, 4.0)},
    "ordered dict": collections.OrderedDict([("z", 1.0), ("y", 2.0)]),
    "namedtuple": Point(1.0, Point(2.0, [3.0])),
    "dataclass": {"layer": Layer(np.ones(2), 0.5, "out")},
    "custom node": Pair([1.0, 2.0], {"k": 3.0}),
    "keyed node": [Named(1.0, (2.0, 3.0))],
    "empty": ((), [], {}),
}


def _keystrs(pairs, keystr):
    return [keystr(path) for path, _ in pairs]


@pytest.mark.parametrize("name", TREES)
def test_leaves_paths_and_roundtrip_as_jax(name):
    tree = TREES[name]
    leaves = tu.tree_leaves(tree)
    assert leaves == jtu.tree_leaves(tree)
    pairs, spec = tu.tree_flatten_with_path(tree)
    jpairs, _ = jtu.tree_flatten_with_path(tree)
    assert _keystrs(pairs, tu.keystr) == _keystrs(jpairs, jtu.keystr)
    assert [tu.keystr(p, simple=True, separator="/") for p, _ in pairs] == \
        [jtu.keystr(p, simple=True, separator="/") for p, _ in jpairs]
    assert [x for _, x in pairs] == leaves
    assert spec == tu.tree_structure(tree) and spec.num_leaves == len(leaves)
    assert tu.tree_unflatten(leaves, spec) == tree
    assert tu.tree_unflatten(spec, leaves) == tree        # JAX's argument order


def test_key_entries_are_jaxs():
    pairs, _ = tu.tree_flatten_with_path({"a": [Point(1.0, 2.0)], "l": Layer(1.0, 2.0)})
    jpairs, _ = jtu.tree_flatten_with_path({"a": [Point(1.0, 2.0)], "l": Layer(1.0, 2.0)})
    assert [repr(p) for p, _ in pairs] == [repr(p) for p, _ in jpairs]
    assert pairs[0][0] == (tu.DictKey("a"), tu.SequenceKey(0), tu.GetAttrKey("x"))
    assert hash(tu.DictKey("a")) == hash(tu.DictKey("a"))
    assert str(tu.FlattenedIndexKey(1)) == str(jtu.FlattenedIndexKey(1))


@pytest.mark.parametrize("a, b", [
    ((1.0, 2.0), [1.0, 2.0]),                       # tuple is not list
    ((1.0, 2.0), Point(1.0, 2.0)),                  # nor a namedtuple
    ({"a": 1.0}, {"a": (1.0,)}),
    ({"a": 1.0, "b": 2.0}, {"a": 3.0, "b": 4.0}),   # same
    (Layer(1.0, 2.0, "x"), Layer(1.0, 2.0, "y")),   # meta fields are structure
    (Layer(1.0, 2.0), Layer(np.ones(3), 5.0)),      # data fields are not
    (Pair(1.0, 2.0, "t"), Pair(1.0, 2.0, "u")),     # nor aux data
    (Pair(1.0, 2.0), Pair(3.0, 4.0)),
])
def test_structures_equal_exactly_when_jaxs_are(a, b):
    assert (tu.tree_structure(a) == tu.tree_structure(b)) == \
        (jtu.tree_structure(a) == jtu.tree_structure(b))


def test_dicts_keep_insertion_order_as_torch_where_jax_sorts():
    tp = pytest.importorskip("torch.utils._pytree")
    tree = {"b": 1.0, "a": (2.0, 3.0), "c": 4.0}
    pairs = tu.tree_leaves_with_path(tree)
    assert [x for _, x in pairs] == tp.tree_leaves(tree) == [1.0, 2.0, 3.0, 4.0]
    assert jtu.tree_leaves(tree) == [2.0, 3.0, 1.0, 4.0]              # JAX: sorted keys
    assert _keystrs(pairs, tu.keystr) == ["['b']", "['a'][0]", "['a'][1]", "['c']"]
    # the same key paths as JAX's, leaf by leaf, in another order
    assert sorted(zip(_keystrs(pairs, tu.keystr), tu.tree_leaves(tree))) == \
        sorted(zip(_keystrs(jtu.tree_flatten_with_path(tree)[0], jtu.keystr),
                   jtu.tree_leaves(tree)))
    # the order is part of the structure (as in torch), but tree_map matches keys by name
    assert tu.tree_structure(tree) != tu.tree_structure({"a": (0.0, 0.0), "b": 0.0, "c": 0.0})
    out = tu.tree_map(lambda x, y: x - y, tree, {"c": 1.0, "a": (1.0, 1.0), "b": 1.0})
    assert list(out) == ["b", "a", "c"] and out == {"b": 0.0, "a": (1.0, 2.0), "c": 3.0}


def test_none_is_a_leaf_as_in_torch():
    tp = pytest.importorskip("torch.utils._pytree")
    tree = {"a": None, "b": (1.0, None)}
    assert tu.tree_leaves(tree) == tp.tree_leaves(tree) == [None, 1.0, None]
    assert jtu.tree_leaves(tree) == [1.0]                             # JAX: a node, no leaves
    assert _keystrs(tu.tree_leaves_with_path(tree), tu.keystr) == ["['a']", "['b'][0]",
                                                                    "['b'][1]"]


def test_tree_map_with_several_trees_as_jax():
    a = {"w": [1.0, 2.0], "b": Point(3.0, 4.0)}
    b = {"w": [10.0, 20.0], "b": Point(30.0, 40.0)}
    c = {"w": 100.0, "b": 200.0}      # a prefix of a's structure: an error in both
    f = lambda x, y: x + 2 * y   # noqa: E731
    assert tu.tree_map(f, a, b) == jtu.tree_map(f, a, b)
    # the first tree is a prefix of the other: its leaf gets the whole subtree, as in JAX
    g = lambda x, y: (x, y)   # noqa: E731
    assert tu.tree_map(g, c, a) == jtu.tree_map(g, c, a)
    with pytest.raises(ValueError) as e:
        tu.tree_map(f, a, c)
    with pytest.raises(ValueError):
        jtu.tree_map(f, a, c)
    msg = str(e.value)
    assert msg.startswith("tree_map(f, tree, *rest): rest[0] does not have the structure of "
                          "tree: at ['w'] tree has a list node where rest[0] has a leaf of "
                          "type float")
    assert repr(tu.tree_structure(a)) in msg and repr(tu.tree_structure(c)) in msg


def test_tree_map_with_path_as_jax():
    tree = {"layer": Layer(np.array([1.0, 2.0]), 0.5), "scale": [3.0]}
    f = lambda path, x: (tu.keystr(path), np.asarray(x).tolist())   # noqa: E731
    jf = lambda path, x: (jtu.keystr(path), np.asarray(x).tolist())  # noqa: E731
    assert tu.tree_leaves(tu.tree_map_with_path(f, tree), is_leaf=lambda x: isinstance(x, tuple)) \
        == jtu.tree_leaves(jtu.tree_map_with_path(jf, tree),
                           is_leaf=lambda x: isinstance(x, tuple))
    other = {"layer": Layer(10.0, 20.0), "scale": [30.0]}
    got = tu.tree_map_with_path(lambda p, x, y: x + y, tree, other)
    assert got.keys() == tree.keys() and got["layer"].b == 20.5 and got["scale"] == [33.0]
    with pytest.raises(ValueError, match=r"tree_map_with_path\(f, tree, \*rest\): rest\[0\]"):
        tu.tree_map_with_path(lambda p, x, y: x, tree, {"layer": 1.0})


def test_is_leaf_as_jax():
    tree = {"a": (1.0, 2.0), "b": [(3.0, 4.0), 5.0]}
    is_pair = lambda x: isinstance(x, tuple)   # noqa: E731
    assert tu.tree_leaves(tree, is_leaf=is_pair) == jtu.tree_leaves(tree, is_leaf=is_pair)
    assert _keystrs(tu.tree_flatten_with_path(tree, is_pair)[0], tu.keystr) == \
        _keystrs(jtu.tree_flatten_with_path(tree, is_pair)[0], jtu.keystr)
    size = lambda x: len(x) if is_pair(x) else -1   # noqa: E731
    assert tu.tree_map(size, tree, is_leaf=is_pair) == jtu.tree_map(size, tree, is_leaf=is_pair)


def test_tree_all_and_tree_reduce_as_jax_and_torch():
    tp = pytest.importorskip("torch.utils._pytree")
    for tree in [{"a": True, "b": [1, 2]}, [1, (0, 1)], [], {"x": 3}]:
        assert tu.tree_all(tree) == jtu.tree_all(tree)
    pos = lambda x: x > 0   # noqa: E731
    for tree in [[1.0, (2.0, -1.0)], {"a": 2.0}]:
        assert tu.tree_all(pos, tree) == tp.tree_all(pos, tree)
    tree = {"a": [1.0, 2.0], "b": 3.0}
    add = lambda x, y: x + y   # noqa: E731
    assert tu.tree_reduce(add, tree) == jtu.tree_reduce(add, tree) == 6.0
    assert tu.tree_reduce(add, tree, 10.0) == jtu.tree_reduce(add, tree, 10.0)
    assert tu.tree_reduce(add, [], 0) == 0
    with pytest.raises(TypeError, match="tree_reduce.*no leaves.*initializer"):
        tu.tree_reduce(add, [])
    with pytest.raises(TypeError, match=r"tree_all\(pred, tree\): pred must be a function"):
        tu.tree_all([1], [2])
    with pytest.raises(TypeError, match=r"tree_all\(tree\).*tree_all\(pred, tree\)"):
        tu.tree_all()


def test_register_dataclass_fields():
    @dataclasses.dataclass
    class Opt:
        lr: object
        steps: int
        mom: object = 0.9

    tu.register_dataclass(Opt, data_fields=["lr", "mom"], meta_fields=["steps"])
    pairs, spec = tu.tree_flatten_with_path(Opt(0.1, 5, 0.8))
    assert [(tu.keystr(p), x) for p, x in pairs] == [(".lr", 0.1), (".mom", 0.8)]
    assert tu.tree_unflatten([1.0, 2.0], spec) == Opt(1.0, 5, 2.0)
    assert spec != tu.tree_structure(Opt(0.1, 6, 0.8))

    @dataclasses.dataclass
    class Bad:
        a: object
        b: object

    with pytest.raises(ValueError, match=r"init fields named nowhere: \['b'\]"):
        tu.register_dataclass(Bad, data_fields=["a"], meta_fields=[])
    with pytest.raises(ValueError, match=r"not init fields of the dataclass: \['c'\]"):
        tu.register_dataclass(Bad, data_fields=["a", "b"], meta_fields=["c"])

    # a plain class with both lists given, as JAX allows; and the decorator form
    class Plain:
        def __init__(self, x, k):
            self.x, self.k = x, k

    tu.register_dataclass(Plain, data_fields=["x"], meta_fields=["k"])
    assert tu.tree_leaves(Plain(1.0, "k")) == [1.0]

    @tu.register_dataclass(meta_fields=["n"])
    @dataclasses.dataclass
    class Deco:
        v: object
        n: int

    assert tu.tree_leaves(Deco(2.0, 3)) == [2.0]


def test_register_pytree_node_class_and_keyed_nodes():
    @tu.register_pytree_node_class
    class Scaled:
        def __init__(self, v, s):
            self.v, self.s = v, s

        def tree_flatten(self):
            return (self.v,), self.s

        @classmethod
        def tree_unflatten(cls, s, children):
            return cls(children[0], s)

    out = tu.tree_map(lambda x: x * 2, Scaled(1.5, "s"))
    assert (out.v, out.s) == (3.0, "s")
    assert tu.keystr(tu.tree_leaves_with_path(Scaled(1.5, "s"))[0][0]) == "[<flat index 0>]"
    with pytest.raises(TypeError, match="lacks tree_flatten and tree_unflatten"):
        tu.register_pytree_node_class(type("NoMethods", (), {}))

    class Bad:
        def __init__(self, a):
            self.a = a

    tu.register_pytree_node(Bad, lambda b: ([b.a], None), lambda _, ch: Bad(*ch),
                            flatten_with_keys_fn=lambda b: ([(tu.GetAttrKey("a"), b.a),
                                                             (tu.GetAttrKey("z"), 0)], None))
    with pytest.raises(ValueError, match="flatten_with_keys_fn must give the children"):
        tu.tree_flatten_with_path(Bad(1.0))


def _loss(p):
    return ad.sum(p["layer"].w ** 2) * p["layer"].b + ad.sum(p["pair"].first * p["pair"].second)


def _params(xp=np):
    return {"layer": Layer(xp.asarray([1.0, -2.0]), xp.asarray(3.0), "out"),
            "pair": Pair(xp.asarray([0.5, 1.5]), xp.asarray([2.0, 4.0]), "t")}


def test_registered_nodes_through_grad_vmap_and_jit():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jax.config.update("jax_enable_x64", True)
    p = _params()
    g = grad(_loss)(p)
    jg = jax.grad(lambda q: jnp.sum(q["layer"].w ** 2) * q["layer"].b
                  + jnp.sum(q["pair"].first * q["pair"].second))(_params(jnp))
    assert tu.tree_structure(g) == tu.tree_structure(p)
    for a, b in zip(tu.tree_leaves(g), jtu.tree_leaves(jg)):
        np.testing.assert_allclose(a, np.asarray(b))
    # vmap over a batch of each leaf: per-example losses
    batched = tu.tree_map(lambda x: np.stack([x, 2 * x]), p)
    losses = vmap(_loss)(batched)
    np.testing.assert_allclose(losses, [_loss(p), _loss(tu.tree_map(lambda x: 2 * x, p))])
    # jit: the registered nodes in and out, the static data kept
    step = ad.jit(lambda q: tu.tree_map(lambda x, d: x - 0.1 * d, q, grad(_loss)(q)))
    for _ in range(2):   # (the second call replays the program)
        out = step(p)
        assert out["layer"].name == "out" and out["pair"].tag == "t"
        for a, x, d in zip(tu.tree_leaves(out), tu.tree_leaves(p), tu.tree_leaves(g)):
            np.testing.assert_allclose(a, x - 0.1 * d)


@pytest.mark.parametrize("name", ["array_api_strict", "torch"])
def test_registered_nodes_through_grad_on_other_backends(name):
    from conftest import BACKENDS, Backend, to_numpy
    if name not in BACKENDS:
        pytest.skip(f"{name} not installed")
    be = Backend(name)
    p = tu.tree_map(lambda x: be(np.asarray(x)), _params())
    g = grad(_loss)(p)
    want = grad(_loss)(_params())
    for a, b in zip(tu.tree_leaves(g), tu.tree_leaves(want)):
        np.testing.assert_allclose(to_numpy(a), b)
