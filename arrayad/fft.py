"""The array API ``fft`` extension (primitives with VJP/JVP/batching rules and composites, all
in ``arrayad/_ops/fft.py``)."""
from ._ops.fft import (fft, fftfreq, fftn, fftshift, hfft, ifft, ifftn, ifftshift,
                       ihfft, irfft, irfftn, rfft, rfftfreq, rfftn)

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
           "fftfreq", "rfftfreq", "fftshift", "ifftshift"]
