"""The fast subset of the peers' own test suites (tools/peer_suites.py --fast): array-api-extra's
tests, SciPy's scipy._lib array-API tests and scikit-learn's test_array_api, on arrayad with each
default backend; every failure must be one listed, with its reason, in
tools/peer_known_failures.txt."""
import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.skipif(any(importlib.util.find_spec(m) is None
                        for m in ("array_api_extra", "scipy", "sklearn")),
                    reason="the peers' suites come from array-api-extra, SciPy and scikit-learn")
def test_peer_suites_fast():
    env = {k: v for k, v in os.environ.items() if k != "ARRAYAD_BACKEND"}
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "peer_suites.py"), "--fast"],
                       cwd=ROOT, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
