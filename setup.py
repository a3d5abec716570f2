"""Build the Cython core (arrayad/_core). Everything else is declared in pyproject.toml."""
import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

# the core's modules, each cimporting only the ones before it (the module docstring of _core.pyx)
CORE = ["_base", "_arrays", "_interp", "_zeros", "_tape", "_core"]
# and, cimporting nothing of them, the register machine of compiled scans (NOTE [scan machine])
# and the calls of vector math functions (NOTE [vector math])
MODULES = CORE + ["_loop_machine", "_vector_math"]
# and the arithmetic of small float64 arrays (NOTE [small arithmetic]). NumPy's headers for
# all: the core reads NumPy arrays' shapes and dtypes through its C API where it is hot, and the
# small arithmetic makes its results with it.
MODULES = MODULES + ["_small_arith"]
# and the greedy colouring of sparsity patterns' graphs (NOTE [colourings])
MODULES = MODULES + ["_graphs"]
extensions = [Extension(f"arrayad._core.{name}", [f"arrayad/_core/{name}.pyx"],
                        include_dirs=[numpy.get_include()],
                        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")])
              for name in MODULES]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={
            "embedsignature": True,
        },
    ),
)
