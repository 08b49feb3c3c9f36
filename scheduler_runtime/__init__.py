"""ksched scheduler runtime: a Python scheduling framework with kube-scheduler's semantics."""

import os as _os

__version__ = "0.1.0"

# numpy's OpenBLAS starts a worker thread per core when numpy loads, and each spins before it sleeps: about
# 80 ms of CPU at every start on 2 cores, more with more. ksched's arrays only take element-wise numpy
# operations, never BLAS, so one thread loses nothing. Set before any numpy import; an explicit setting wins.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
