"""GradBench's JAX tool, run from a GradBench checkout with two changes made from outside:
x64 on for every module, and each timed call waiting for its result.

    python jax_blocking.py GRADBENCH_CHECKOUT

The published tool times ``function(input)``, which returns as soon as JAX has dispatched the
work (JAX's calls are asynchronous), and only some of its modules turn x64 on (``ode`` does not,
so its float64 inputs would run in float32). This script patches GradBench's ``wrap`` decorators
before the tool's modules are imported, so that the timed function is
``jax.block_until_ready(function(input))``, then runs the tool's own ``run.py``.
"""

import runpy
import sys
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

checkout = Path(sys.argv[1]).resolve()
tool = checkout / "python" / "gradbench" / "gradbench" / "tools" / "jax"
sys.path[:0] = [str(tool), str(checkout / "python" / "gradbench")]

from gradbench import wrap  # noqa: E402


def waiting(decorator_factory):
    def factory(**options):
        decorator = decorator_factory(**options)

        def decorate(function):
            wrapped = decorator(lambda input: jax.block_until_ready(function(input)))
            wrapped.function = function
            return wrapped

        return decorate

    return factory


wrap.multiple_runs = waiting(wrap.multiple_runs)
wrap.function = waiting(wrap.function)
sys.argv = [str(tool / "run.py")]
runpy.run_path(str(tool / "run.py"), run_name="__main__")
