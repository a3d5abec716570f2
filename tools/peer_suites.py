"""Peers' own test suites with arrayad as one more backend: array-api-extra's ``tests/``, SciPy's
array-API tests and scikit-learn's array-API tests, from their installed copies (nothing is
fetched or edited; ``tools/peer_plugin.py`` adds arrayad to each suite's backend list).

    python tools/peer_suites.py                 # every suite, every column (about an hour)
    python tools/peer_suites.py --fast          # the CI subset, arrayad's columns (minutes)
    python tools/peer_suites.py --suites scipy --columns arrayad -v

Columns: the suite on plain NumPy and on array-api-strict (as its maintainers run it), and on
arrayad with each of its default backends (``ARRAYAD_BACKEND=numpy``, ``torch``,
``array_api_strict``). Every failure or error in an arrayad column must be listed in
``tools/peer_known_failures.txt`` with its reason; the exit status is 1 otherwise.
"""
import argparse
import collections
import importlib.util
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KNOWN = os.path.join(ROOT, "tools", "peer_known_failures.txt")

# (label, --peer-backend, ARRAYAD_BACKEND)
COLUMNS = {
    "numpy": ("numpy", None),
    "array_api_strict": ("array_api_strict", None),
    "arrayad": ("arrayad", "numpy"),
    "arrayad-torch": ("arrayad", "torch"),
    "arrayad-strict": ("arrayad", "array_api_strict"),
}
ARRAYAD_COLUMNS = ("arrayad", "arrayad-torch", "arrayad-strict")

SKLEARN_MODULES = [
    "decomposition/tests/test_pca.py", "metrics/tests/test_classification.py",
    "metrics/tests/test_common.py", "metrics/tests/test_pairwise.py",
    "metrics/cluster/tests/test_common.py", "metrics/cluster/tests/test_supervised.py",
    "_loss/tests/test_loss.py", "_loss/tests/test_link.py",
    "preprocessing/tests/test_polynomial.py", "preprocessing/tests/test_data.py",
    "preprocessing/tests/test_label.py", "tests/test_pipeline.py", "tests/test_calibration.py",
    "tests/test_kernel_approximation.py", "tests/test_naive_bayes.py",
    "mixture/tests/test_gaussian_mixture.py", "utils/tests/test_array_api.py",
    "utils/tests/test_validation.py", "utils/tests/test_multiclass.py",
    "utils/tests/test_indexing.py", "utils/tests/test_extmath.py",
    "utils/tests/test_optimize.py", "utils/tests/test_stats.py",
    "linear_model/tests/test_logistic.py", "linear_model/tests/test_ridge.py",
    "linear_model/_glm/tests/test_glm.py", "model_selection/tests/test_split.py",
    "model_selection/tests/test_search.py", "model_selection/tests/test_validation.py",
    "tests/test_common.py",
]


def _package_dir(name):
    spec = importlib.util.find_spec(name)
    return None if spec is None else os.path.dirname(spec.origin)


def suites(fast):
    """``{name: (pytest targets, extra pytest args, environment)}`` of the installed suites."""
    out = {}
    xpx = _package_dir("array_api_extra")
    if xpx and os.path.isdir(os.path.join(xpx, "tests", "main")):
        # -W error: the suite's own configuration turns warnings into errors
        out["array-api-extra"] = ([os.path.join(xpx, "tests", "main")], ["-W", "error"], {})
    sp = _package_dir("scipy")
    if sp:
        subs = ["_lib"] if fast else ["_lib", "special", "fft", "cluster", "integrate", "stats"]
        out["scipy"] = ([os.path.join(sp, s) for s in subs], [], {"SCIPY_ARRAY_API": "1"})
    sk = _package_dir("sklearn")
    if sk:
        mods = ["utils/tests/test_array_api.py"] if fast else SKLEARN_MODULES
        out["scikit-learn"] = ([os.path.join(sk, m) for m in mods], [],
                               {"SCIPY_ARRAY_API": "1"})
    return out


def run_one(suite, targets, args, env_extra, column, workdir, verbose):
    """Runs one suite on one column; ``[(outcome, test id)]`` and the seconds it took."""
    backend, default = COLUMNS[column]
    report = os.path.join(workdir, f"{suite}.{column}.tsv")
    log = os.path.join(workdir, f"{suite}.{column}.log")
    env = dict(os.environ, **env_extra)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("ARRAYAD_BACKEND", None)
    if default is not None:
        env["ARRAYAD_BACKEND"] = default
    ini = os.path.join(workdir, "pytest.ini")      # none of arrayad's own pytest settings
    cmd = [sys.executable, "-m", "pytest", "-c", ini, "--rootdir", workdir, "-q",
           "-p", "tools.peer_plugin", "-p", "no:cacheprovider", "-W",
           "ignore::pytest.PytestUnknownMarkWarning", *args,
           f"--peer-backend={backend}", f"--peer-report={report}", *targets]
    t0 = time.perf_counter()
    with open(log, "w") as f:
        subprocess.run(cmd, cwd=workdir, env=env, stdout=f, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - t0
    if not os.path.exists(report):
        with open(log) as f:
            tail = f.read()[-3000:]
        raise SystemExit(f"peer_suites: {suite} on {column} did not run:\n{tail}")
    worst = {}
    order = ["passed", "skipped", "xfailed", "xpassed", "failed", "error"]
    with open(report) as f:
        for line in f:
            outcome, tid = line.rstrip("\n").split("\t", 1)
            if order.index(outcome) >= order.index(worst.get(tid, "passed")):
                worst[tid] = outcome
    if verbose:
        print(f"  {suite} / {column}: {seconds:.0f} s, log {log}", file=sys.stderr)
    return worst, seconds


def read_known(path=KNOWN):
    """``{(column, test id): reason}``; a line is ``columns | test id | reason``."""
    known = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split(" | ")]
            if len(parts) != 3 or not parts[2]:
                raise SystemExit(f"{path}:{n}: expected 'columns | test id | reason'")
            cols = ARRAYAD_COLUMNS if parts[0] == "*" else parts[0].split(",")
            for c in cols:
                if c not in ARRAYAD_COLUMNS:
                    raise SystemExit(f"{path}:{n}: unknown column {c!r}")
                known[c, parts[1]] = parts[2]
    return known


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fast", action="store_true",
                   help="the CI subset: array-api-extra, scipy._lib, sklearn's test_array_api, "
                        "arrayad's columns only")
    p.add_argument("--suites", default=None, help="comma-separated suite names")
    p.add_argument("--columns", default=None,
                   help="comma-separated, of " + ", ".join(COLUMNS))
    p.add_argument("--keep", default=None, help="a directory for the logs and reports")
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args(argv)

    all_suites = suites(a.fast)
    names = a.suites.split(",") if a.suites else list(all_suites)
    for n in names:
        if n not in all_suites:
            raise SystemExit(f"peer_suites: suite {n!r} is not installed or unknown; "
                             f"installed: {', '.join(all_suites)}")
    if a.columns:
        columns = a.columns.split(",")
    else:
        columns = list(ARRAYAD_COLUMNS if a.fast else COLUMNS)
    for c in columns:
        if c not in COLUMNS:
            raise SystemExit(f"peer_suites: unknown column {c!r}; one of {', '.join(COLUMNS)}")
    if importlib.util.find_spec("torch") is None and "arrayad-torch" in columns:
        columns.remove("arrayad-torch")

    known = read_known()
    workdir = a.keep or tempfile.mkdtemp(prefix="arrayad-peers-")
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, "pytest.ini"), "w") as f:
        f.write("[pytest]\n")

    table = collections.OrderedDict()
    unexpected, fixed = [], []
    for s in names:
        targets, args, env = all_suites[s]
        for c in columns:
            outcomes, seconds = run_one(s, targets, args, env, c, workdir, a.verbose)
            counts = collections.Counter(outcomes.values())
            n_known = 0
            if c in ARRAYAD_COLUMNS:
                for tid, o in sorted(outcomes.items()):
                    if o in ("failed", "error"):
                        if (c, tid) in known:
                            n_known += 1
                        else:
                            unexpected.append((s, c, tid, o))
                    elif o == "passed" and (c, tid) in known:
                        fixed.append((s, c, tid))
            table[s, c] = (counts, seconds, n_known)

    print(f"{'suite':18} {'column':18} {'passed':>7} {'failed':>7} {'errors':>7} "
          f"{'of them known':>14} {'skipped':>8} {'seconds':>8}")
    for (s, c), (counts, seconds, n_known) in table.items():
        # (xpassed: a test the suite xfails, or skips on array-api-strict, that passed)
        print(f"{s:18} {c:18} {counts['passed'] + counts['xpassed']:7} {counts['failed']:7} "
              f"{counts['error']:7} "
              f"{n_known if c in ARRAYAD_COLUMNS else '':>14} "
              f"{counts['skipped'] + counts['xfailed']:8} {seconds:8.0f}")
    if fixed:
        print(f"\nListed in {os.path.relpath(KNOWN, ROOT)} but passing now (remove them):")
        for s, c, tid in fixed:
            print(f"  {c} | {tid}")
    if unexpected:
        print(f"\nFailures not in {os.path.relpath(KNOWN, ROOT)} (logs in {workdir}):")
        for s, c, tid, o in unexpected:
            print(f"  {c} | {tid}   ({o})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
