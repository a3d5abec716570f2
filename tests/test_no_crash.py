"""No public or core entry point can crash the interpreter.

The compiled core trusts the types of what it follows at C speed (a node's edges, a tracer's
interpreter, the primitive given to ``bind``); every way in from Python must check them. This
fuzz run feeds junk (None, numbers, strings, wrong tuples, foreign objects) to every callable of
``arrayad._core._core``, of the namespaces and of a Tensor's and a tracer's attributes, assigns
junk to every writable attribute of the core's objects and then computes with them, all in a
subprocess: exceptions are expected, a dead process (segfault, abort) fails the test.
"""

import subprocess
import sys
import textwrap

FUZZ = textwrap.dedent(r'''
    import gc, inspect, itertools, threading, warnings
    import numpy as np
    import arrayad as ad
    from arrayad import func, autograd
    from arrayad._core import _core

    warnings.simplefilter("ignore")
    ad.manual_seed(0)
    x = ad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    node = y.grad_fn
    junk = [None, 0, -1, 3, 1.5, "abc", b"x", (), ((1, 0),), (None,), [1], {}, object(),
            np.ones(2), ad.tensor([1.0]), node, _core.Meta(), threading.Lock(), print]
    calls = 0

    def call(f, args):
        global calls
        calls += 1
        try:
            r = f(*args)
            if inspect.isgenerator(r):
                list(itertools.islice(r, 3))
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise

    def fuzz(f):
        call(f, ())
        for a in junk:
            call(f, (a,))
        for a, b in itertools.product(junk[:9], repeat=2):
            call(f, (a, b))
        for a in junk[:9]:
            call(f, (node, a, a))

    SKIP = {"install_host", "install_operators", "install_complex_dtypes", "register_backend_type",
            "register_inplace_accumulation", "set_backend", "backend", "exit", "quit"}

    def fuzz_methods(obj):
        for attr in dir(obj):
            if not attr.startswith("__"):
                try:
                    m = getattr(obj, attr)
                except BaseException:
                    continue
                if callable(m):
                    fuzz(m)

    def public(mod):
        for name in dir(mod):
            if name in SKIP or (name.startswith("__") and name.endswith("__")):
                continue
            obj = getattr(mod, name)
            if callable(obj):
                yield name, obj

    for mod in (_core, ad, func, autograd, autograd.forward_ad, ad.linalg, ad.fft):
        for name, f in public(mod):
            fuzz(f)
            if isinstance(f, type):
                try:
                    inst = f.__new__(f)   # an instance whose fields were never set
                except BaseException:
                    continue
                for attr in dir(inst):
                    if attr.startswith("__"):
                        continue
                    try:
                        m = getattr(inst, attr)
                    except BaseException:
                        continue
                    if callable(m):
                        fuzz(m)
                    for v in junk:   # writable fields: assign junk, then use the object
                        try:
                            setattr(inst, attr, v)
                        except BaseException:
                            continue
                        call(ad.sin, (inst,))
                        call(lambda: inst + 1, ())
                        call(repr, (inst,))
        while _core.stack_depth():   # (a fuzzed __enter__ may have opened a transform)
            _core.interpreters()[-1].close()

    # the attributes of a live tensor, a tracer and a node
    def tracer_methods(t):
        fuzz_methods(t)
        return ad.sum(t)

    for v in (ad.tensor([1.0, 2.0], requires_grad=True), ad.tensor([3.0])):
        fuzz_methods(v)
    call(func.grad(tracer_methods), (np.ones(2),))
    call(func.vmap(tracer_methods), (np.ones((2, 2)),))
    call(func.jvp, (tracer_methods, (np.ones(2),), (np.ones(2),)))
    for attr in ("prim", "inputs", "params", "ans", "edges", "leaf", "retained", "eager",
                 "released", "partner_result"):
        for v in junk:
            x2 = ad.tensor([1.0, 2.0], requires_grad=True)
            z = ad.sin(x2) * x2
            for n in (z.grad_fn, x2._node):
                try:
                    setattr(n, attr, v)
                except BaseException:
                    pass
            call(z.sum().backward, ())
            call(autograd.grad, (z.sum(), x2))
    gc.collect()
    print("fuzzed", calls, "calls")
''')


def test_no_entry_point_crashes_the_interpreter():
    proc = subprocess.run([sys.executable, "-c", FUZZ], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, (
        f"the fuzz run died with exit code {proc.returncode} (a negative code is a signal: "
        f"-11 segfault, -6 abort)\nstdout tail: {proc.stdout[-2000:]}\n"
        f"stderr tail: {proc.stderr[-4000:]}")
    assert "fuzzed" in proc.stdout
    calls = int(proc.stdout.split("fuzzed")[1].split()[0])
    assert calls > 10_000
