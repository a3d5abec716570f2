"""The array API ``fft`` extension."""
__all__ = []
