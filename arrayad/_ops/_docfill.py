"""Helpers for docstrings assembled from shared sections (the reductions, the fft transforms)."""

import textwrap


def paragraph(text, indent=4):
    """``text`` as a paragraph of a NumPy-style docstring section: wrapped to 96 columns and
    indented, each inline literal (````x.sum(dim=0)````) kept on one line."""
    parts = text.split("``")
    text = "``".join(p.replace(" ", "\0") if i % 2 else p for i, p in enumerate(parts))
    pad = " " * indent
    return textwrap.fill(text, 96, initial_indent=pad, subsequent_indent=pad).replace("\0", " ")
