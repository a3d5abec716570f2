"""The API reference's promises: every public name has a docstring that says what it returns,
which errors it raises and shows a short example, and every example runs (as a doctest).

The list of public names is the one the documentation site's API pages are generated from
(``docs/_ext/api_pages.py``), so a name cannot appear in the reference without being checked here.
"""

import doctest
import importlib
import os
import sys

import numpy as np
import pytest

import arrayad

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "docs", "_ext"))
import api_pages  # noqa: E402

# (module, name, object) for every documented callable
ENTRIES = []
for _mod in api_pages.MODULES:
    _m = importlib.import_module(_mod)
    for _name in api_pages.public_names(_mod):
        _obj = getattr(_m, _name)
        if callable(_obj) and not (_mod == "arrayad" and api_pages._is_dtype(_obj)):
            ENTRIES.append((_mod, _name, _obj))
IDS = [f"{m}.{n}" for m, n, _ in ENTRIES]


@pytest.mark.parametrize("mod, name, obj", ENTRIES, ids=IDS)
def test_docstring_says_returns_raises_and_shows_an_example(mod, name, obj):
    doc = obj.__doc__ or ""
    missing = [what for what, there in [
        ("a summary line", doc.strip() != ""),
        ("an example (>>>)", ">>>" in doc),
        ("a Returns section", isinstance(obj, type) or "Returns\n" in doc or "Yields\n" in doc),
        ("a Raises section", "Raises\n" in doc),
    ] if not there]
    assert not missing, f"{mod}.{name}: the docstring lacks " + ", ".join(missing)


@pytest.mark.parametrize("mod, name, obj", ENTRIES, ids=IDS)
def test_docstring_examples_run(mod, name, obj):
    globs = {"ad": arrayad, "arrayad": arrayad, "np": np}
    finder = doctest.DocTestFinder(recurse=False)
    tests = finder.find(obj, f"{mod}.{name}", globs=globs)
    examples = [t for t in tests if t.examples]
    if not examples:
        pytest.skip("no example (test_docstring_says_returns_raises_and_shows_an_example fails)")
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    state = (arrayad.is_grad_enabled(), arrayad.backends.default_backend().name)
    rng = arrayad.get_rng_state()   # (examples of manual_seed reseed: put it back for others)
    try:
        for t in examples:
            runner.run(t)
    finally:
        arrayad.set_rng_state(rng)
    assert (arrayad.is_grad_enabled(), arrayad.backends.default_backend().name) == state, \
        "the example left grad mode or the default backend changed"
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{results.failed} of the examples of {mod}.{name} failed (above)"
