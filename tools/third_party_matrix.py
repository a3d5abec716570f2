"""The third-party matrix: unmodified array-API library calls (``tests/third_party_cases.py``)
under grad, jvp and vmap, for arrayad (NumPy, array-api-strict and torch inputs), torch.func on
torch tensors and JAX on JAX arrays, each checked against finite differences / a Python loop.

    python tools/third_party_matrix.py                     # the tables, as text
    python tools/third_party_matrix.py --markdown          # the same as Markdown
    python tools/third_party_matrix.py --update-docs       # counts in docs/array_api_libraries.md
    python tools/third_party_matrix.py --update-known-failures   # the table of the test module
    python tools/third_party_matrix.py --libraries arrayad --family scipy.special -v

JAX compiles every operation it runs eagerly, so its column takes minutes (the others seconds);
``--libraries arrayad,torch.func`` leaves it out. Run single-threaded on a shared machine
(``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1``). The exit status is 1 when arrayad gives a wrong
value anywhere, the known ones (KNOWN_WRONG in tests/test_third_party.py) included.
"""
import argparse
import collections
import datetime
import importlib.util
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]   # this checkout's arrayad, and the cases

import third_party_cases as T  # noqa: E402

TEST_FILE = os.path.join(ROOT, "tests", "test_third_party.py")
DOC_FILE = os.path.join(ROOT, "docs", "array_api_libraries.md")


def columns(libraries):
    """``[(label, library, backend)]``: the columns of the tables, installed libraries only."""
    out = []
    for lib in libraries:
        if lib == "arrayad":
            out += [(f"arrayad ({b})", "arrayad", b) for b in T.ARRAYAD_BACKENDS
                    if b == "numpy" or importlib.util.find_spec(b) is not None]
        elif lib == "torch.func" and importlib.util.find_spec("torch") is not None:
            out.append(("torch.func (torch)", "torch.func", "torch"))
        elif lib == "jax" and importlib.util.find_spec("jax") is not None:
            out.append(("JAX (jax)", "jax", "jax"))
    return out


def measure(cases, cols, verbose=False):
    """``{(label, case id, transform): Outcome}`` over every case, transform and column."""
    results = {}
    for label, lib, backend in cols:
        for c in cases:
            for t in T.TRANSFORMS:
                o = T.run(c, t, lib, backend)
                results[label, c.id, t] = o
                if verbose and o.status != "ok":
                    print(f"{label:22} {t:4} {c.id:40} {o}", file=sys.stderr)
    return results


def _count(results, label, cases, transform, status):
    return sum(results[label, c.id, transform].status == status for c in cases)


def summary_rows(results, cases, cols):
    """One row per column: ok / raises / WRONG for each transform."""
    rows = []
    for label, _, _ in cols:
        row = [label]
        for t in T.TRANSFORMS:
            row.append(" / ".join(str(_count(results, label, cases, t, s))
                                  for s in ("ok", "raises", "WRONG")))
        rows.append(row)
    return ["library (inputs)"] + [f"{t} ok / raises / WRONG" for t in T.TRANSFORMS], rows


def family_rows(results, cases, cols):
    """One row per family: the ok count of each column and transform (``g/j/v``), WRONG marked."""
    head = ["family", "calls"] + [label for label, _, _ in cols]
    rows = []
    for fam in sorted({c.family for c in cases}):
        fc = [c for c in cases if c.family == fam]
        row = [fam, str(len(fc))]
        for label, _, _ in cols:
            cell = "/".join(str(_count(results, label, fc, t, "ok")) for t in T.TRANSFORMS)
            wrong = sum(_count(results, label, fc, t, "WRONG") for t in T.TRANSFORMS)
            row.append(cell + (f" ({wrong} WRONG)" if wrong else ""))
        rows.append(row)
    return head, rows


def reason_rows(results, cases, label):
    """Per family, the commonest first line of arrayad's exceptions: why its calls fail."""
    rows = []
    for fam in sorted({c.family for c in cases}):
        lines = collections.Counter(
            results[label, c.id, t].detail for c in cases if c.family == fam for t in T.TRANSFORMS
            if results[label, c.id, t].status == "raises")
        if lines:
            line, n = lines.most_common(1)[0]
            rows.append([fam, str(n), _shorten(line, 150)])
    return ["family", "of its failures", "commonest error (first line)"], rows


def wrong_rows(results, cases, cols):
    rows = [[label, c.id, t, results[label, c.id, t].detail]
            for label, _, _ in cols for c in cases for t in T.TRANSFORMS
            if results[label, c.id, t].status == "WRONG"]
    return ["library (inputs)", "case", "transform", "disagreement"], rows


def _shorten(text, n):
    return text if len(text) <= n else text[:n - 3] + "..."


def render(head, rows, markdown):
    if markdown:
        esc = lambda s: s.replace("|", "\\|")   # noqa: E731
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    fmt = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths))   # noqa: E731
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def report(results, cases, cols, markdown):
    import numpy
    versions = [f"numpy {numpy.__version__}"]
    for mod in ("scipy", "sklearn", "array_api_extra", "einops", "torch", "jax"):
        if importlib.util.find_spec(mod) is not None:
            versions.append(f"{mod} {importlib.import_module(mod).__version__}")
    parts = [f"Measured {datetime.date.today().isoformat()} with "
             f"`python tools/third_party_matrix.py` on {len(cases)} calls "
             f"({', '.join(versions)}).", "",
             "Per library, each transform: calls that give the right value / raise / give a wrong "
             "value (checked against central finite differences and a Python loop).", "",
             render(*summary_rows(results, cases, cols), markdown), "",
             "Per family, the calls that work under grad/jvp/vmap:", "",
             render(*family_rows(results, cases, cols), markdown)]
    label = cols[0][0] if cols and cols[0][1] == "arrayad" else None
    if label is not None:
        parts += ["", f"Why the {label} calls fail, per family:", "",
                  render(*reason_rows(results, cases, label), markdown)]
    head, rows = wrong_rows(results, cases, cols)
    parts += ["", "Wrong values:" if rows else "Wrong values: none.", ""]
    if rows:
        parts += [render(head, rows, markdown), ""]
    return "\n".join(parts)


def _replace_block(path, begin, end, body):
    text = open(path).read()
    pattern = re.compile(rf"({re.escape(begin)}[^\n]*\n).*?(\n?[ \t]*{re.escape(end)})", re.S)
    if not pattern.search(text):
        sys.exit(f"third_party_matrix: {path} has no {begin!r} ... {end!r} block")
    new = pattern.sub(lambda m: m.group(1) + body + m.group(2), text, count=1)
    with open(path, "w") as f:
        f.write(new)


def update_known_failures(results, cases):
    """Rewrite the known-failures table of tests/test_third_party.py from arrayad's outcomes."""
    lines = []
    for c in cases:
        for t in T.TRANSFORMS:
            for b in T.ARRAYAD_BACKENDS:
                o = results.get((f"arrayad ({b})", c.id, t))
                if o is not None and o.status == "raises":
                    msg = _shorten(o.detail.replace(" | ", " / ").replace("\\", "/"), 100)
                    lines.append(f"{c.id} | {t} | {b} | {o.builtin} | {msg}".replace('"', "'"))
    _replace_block(TEST_FILE, "# BEGIN KNOWN FAILURES", "# END KNOWN FAILURES",
                   '_KNOWN = """\n' + "\n".join(lines) + '\n"""')
    return len(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--markdown", action="store_true", help="Markdown tables")
    p.add_argument("--libraries", default="arrayad,torch.func,jax",
                   help="comma-separated: arrayad, torch.func, jax")
    p.add_argument("--family", action="append", help="only these families (repeatable)")
    p.add_argument("--update-docs", action="store_true",
                   help="rewrite the measured block of docs/array_api_libraries.md")
    p.add_argument("--update-known-failures", action="store_true",
                   help="rewrite the known failures of tests/test_third_party.py (arrayad only)")
    p.add_argument("-v", "--verbose", action="store_true", help="print each non-ok outcome")
    args = p.parse_args(argv)
    libraries = args.libraries.split(",")
    if args.update_known_failures and not args.update_docs:
        libraries = ["arrayad"]
    cases = [c for c in T.CASES if not args.family or c.family in args.family]
    cols = columns(libraries)
    results = measure(cases, cols, args.verbose)
    if args.update_known_failures:
        if args.family:
            sys.exit("third_party_matrix: --update-known-failures needs every family")
        print(f"known failures: {update_known_failures(results, cases)} lines", file=sys.stderr)
    if args.update_docs:
        _replace_block(DOC_FILE, "<!-- BEGIN MEASURED", "<!-- END MEASURED -->",
                       "\n" + report(results, cases, cols, markdown=True))
        print(f"rewrote the measured block of {DOC_FILE}", file=sys.stderr)
    if not (args.update_docs or args.update_known_failures):
        print(report(results, cases, cols, args.markdown))
    return int(any(label.startswith("arrayad") and o.status == "WRONG"
                   for (label, _, _), o in results.items()))


if __name__ == "__main__":
    sys.exit(main())
