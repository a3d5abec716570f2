#!/usr/bin/env python
"""Run the test suite on the GPU backends: CuPy arrays and torch CUDA tensors.

On a machine with an NVIDIA GPU, CuPy (``pip install cupy-cuda12x``) and a CUDA build of torch:

    python tools/gpu_suite.py            # both runs, a summary line each
    python tools/gpu_suite.py --quick    # the transform and operator tests only

Each run is ``pytest -k <backend>`` over the parametrized tests, with the test data made on the
GPU (``ARRAYAD_TEST_CUPY=1`` adds CuPy to the ``backend`` fixture of tests/conftest.py;
``ARRAYAD_TEST_TORCH_DEVICE=cuda`` makes the torch test arrays CUDA tensors). The summary (passed,
failed, skipped, seconds) is printed and, with ``--json PATH``, written for a report.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICK = ["tests/test_ops.py", "tests/test_func.py", "tests/test_function.py",
         "tests/test_inside_transforms.py", "tests/test_special.py"]


def gpu_available():
    try:
        import torch
        if torch.cuda.is_available():
            return True
    except ImportError:
        pass
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def run(label, env_extra, selector, paths):
    env = dict(os.environ, **env_extra)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
           "-k", selector, *paths]
    t0 = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.time() - t0
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-500:]
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|xfailed|error)",
                                               tail)}
    print(f"{label}: {tail}  ({seconds:.0f} s)")
    if proc.returncode not in (0, 5):
        print(proc.stdout[-4000:])
    return {"label": label, "returncode": proc.returncode, "seconds": round(seconds),
            "summary": tail, **counts}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="transform and operator tests only")
    ap.add_argument("--json", help="write the summaries to this file")
    args = ap.parse_args()
    if not gpu_available():
        print("no GPU (torch.cuda / CuPy): nothing to run")
        return 2
    paths = QUICK if args.quick else ["tests"]
    results = []
    try:
        import cupy  # noqa: F401
        results.append(run("cupy", {"ARRAYAD_TEST_CUPY": "1"}, "cupy", paths))
    except ImportError:
        print("cupy: not installed, skipped")
    try:
        import torch
        if torch.cuda.is_available():
            results.append(run("torch-cuda", {"ARRAYAD_TEST_TORCH_DEVICE": "cuda"}, "torch",
                               paths))
    except ImportError:
        print("torch: not installed, skipped")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if any(r["returncode"] not in (0, 5) for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
