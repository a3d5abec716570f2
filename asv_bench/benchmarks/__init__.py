"""asv benchmarks of arrayad (see ``common.py`` for the shared data and workloads).

Every figure is float64 and single-threaded, so that timings measure arrayad's own overhead
rather than the BLAS thread pool. The thread variables must be set before NumPy (or torch) is
first imported, which is why they live at the top of the package's ``__init__``: asv imports the
package before any benchmark module.
"""
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
