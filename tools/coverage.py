"""Generate ``docs/coverage.md``: every public function of arrayad (the namespace, ``linalg``,
``fft``) with how it is differentiated and batched, and how many operator-database samples
(``tests/opdb.py``) exercise it.

    python tools/coverage.py            # rewrite docs/coverage.md
    python tools/coverage.py --check    # exit 1 if docs/coverage.md is out of date

The rules are read from the tables every ``arrayad/_ops`` module keeps: ``PRIMS`` (name ->
primitive) and ``COMPOSITES`` (functions written with other arrayad functions). The output is
deterministic (sorted, no timestamps), so ``tests/test_ops.py`` can compare it with the committed
file.
"""
import importlib
import os
import pkgutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "coverage.md")

# Public functions whose primitive has another name.
ALIASES = {"asarray": "copy", "empty_like": "zeros_like"}

# Public functions that take no array to differentiate (shapes, dtypes, Python data, random
# state): there is nothing to trace, so no rules are expected.
NOT_TRACED = {
    "tensor", "zeros", "ones", "empty", "full", "arange", "linspace", "eye", "from_dlpack",
    "randn", "rand", "randint", "manual_seed", "get_rng_state", "set_rng_state",
    "isdtype", "result_type", "can_cast", "finfo", "iinfo", "broadcast_shapes", "allclose",
    "fft.fftfreq", "fft.rfftfreq",
}


def _ops_modules():
    import arrayad._ops as pkg
    mods = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        mods.append(importlib.import_module(f"arrayad._ops.{info.name}"))
    return mods


def public_functions():
    """``[(section, qualified name, function)]``: the namespace, then linalg, then fft."""
    import arrayad as ad
    out = []
    seen = set()
    for m in _ops_modules():
        if m.__name__.endswith((".linalg_ext", ".fft")):
            continue     # the extensions' own modules: listed under their namespace below
        for name in getattr(m, "__all__", []):
            fn = getattr(ad, name, None)
            if callable(fn) and name not in seen:
                seen.add(name)
                out.append(("namespace", name, fn))
    for ext in ("linalg", "fft"):
        mod = getattr(ad, ext)
        for name in getattr(mod, "__all__", []):
            fn = getattr(mod, name, None)
            if callable(fn):
                out.append((ext, f"{ext}.{name}", fn))
    return sorted(out, key=lambda r: ({"namespace": 0, "linalg": 1, "fft": 2}[r[0]], r[1]))


def _owner(qualname, fn, mods):
    """The ``_ops`` module that declares ``fn`` in its tables (a module that merely re-exports
    it, as linalg_ext does with matrix_transpose, comes second)."""
    base = qualname.split(".")[-1]
    key = ALIASES.get(base, base)
    mine = [m for m in mods if getattr(m, base, None) is fn]
    for m in mine:
        if base in getattr(m, "COMPOSITES", ()) or key in getattr(m, "PRIMS", {}):
            return m
    for m in mine:
        if base in getattr(m, "__all__", ()):
            return m
    return None


def classify(qualname, fn, mods=None):
    """``(kind, primitive or None)``: kind is "primitive", "composite", "not traced" or
    "undeclared" (a function in no module's PRIMS or COMPOSITES)."""
    from arrayad._core._core import _PRIMITIVES
    mods = _ops_modules() if mods is None else mods
    base = qualname.split(".")[-1]
    if qualname in NOT_TRACED:
        return "not traced", None
    m = _owner(qualname, fn, mods)
    if m is not None and base in getattr(m, "COMPOSITES", ()):
        return "composite", None
    key = ALIASES.get(base, base)
    prims = getattr(m, "PRIMS", {}) if m is not None else {}
    p = prims.get(key) or prims.get(qualname) or _PRIMITIVES.get(key)
    if p is not None:
        return "primitive", p
    return "undeclared", None


def _rule(p, attr):
    if getattr(p, attr) is not None:
        return "yes"
    if attr != "batch" and not p.differentiable:
        return "non-differentiable"
    return "no (loop fallback)" if attr == "batch" else "**no**"


def sample_counts():
    """Number of opdb samples per public name."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    try:
        import opdb
    finally:
        sys.path.pop(0)
    counts = {}
    for o in opdb.available():
        counts[o.name] = counts.get(o.name, 0) + len(o.samples(0))
    return counts


def rows():
    mods = _ops_modules()
    counts = sample_counts()
    out = []
    for section, name, fn in public_functions():
        kind, p = classify(name, fn, mods)
        if kind == "primitive":
            prim = f"`{p.name}`"
            vjp, jvp, batch = _rule(p, "vjp"), _rule(p, "jvp"), _rule(p, "batch")
        elif kind == "composite":
            prim = "composite"
            vjp = jvp = batch = "composite"
        elif kind == "not traced":
            prim = "no array input"
            vjp = jvp = batch = "-"
        else:
            prim = "**undeclared**"
            vjp = jvp = batch = "?"
        out.append((section, name, prim, vjp, jvp, batch, counts.get(name, 0)))
    return out


def render():
    lines = [
        "# Coverage of the public functions",
        "",
        "Generated by `python tools/coverage.py` from the rule tables (`PRIMS`, `COMPOSITES` in",
        "`arrayad/_ops/*.py`) and the operator database (`tests/opdb.py`); `tests/test_ops.py`",
        "fails when this file is out of date. *composite*: written with other arrayad functions,",
        "whose rules it inherits. *loop fallback*: vmap runs a Python loop over the batch and",
        "warns. *samples*: opdb samples exercising the function (each runs on every backend).",
        "",
    ]
    titles = {"namespace": "Namespace (`arrayad`)", "linalg": "`arrayad.linalg`",
              "fft": "`arrayad.fft`"}
    all_rows = rows()
    for section in ("namespace", "linalg", "fft"):
        sec = [r for r in all_rows if r[0] == section]
        if not sec:
            continue
        lines += [f"## {titles[section]}", "",
                  "| function | primitive | VJP | JVP | batching | samples |",
                  "|---|---|---|---|---|---|"]
        for _, name, prim, vjp, jvp, batch, n in sec:
            lines.append(f"| `{name}` | {prim} | {vjp} | {jvp} | {batch} | {n} |")
        lines.append("")
    summary = {}
    for r in all_rows:
        kind = r[2].strip("*") if r[2] in ("composite", "no array input", "**undeclared**") \
            else "primitive"
        summary[kind] = summary.get(kind, 0) + 1
    tested = sum(1 for r in all_rows if r[6] > 0)
    lines += ["## Totals", "",
              f"{len(all_rows)} public functions: " + ", ".join(
                  f"{v} {k}" for k, v in sorted(summary.items())) +
              f"; {tested} exercised by the operator database "
              f"({sum(r[6] for r in all_rows)} samples).", ""]
    return "\n".join(lines)


def main(argv):
    sys.path.insert(0, ROOT)
    text = render()
    if "--check" in argv:
        with open(OUT) as f:
            if f.read() != text:
                print("docs/coverage.md is out of date: run python tools/coverage.py")
                return 1
        return 0
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
