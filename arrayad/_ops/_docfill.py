"""Helpers for docstrings assembled from shared sections (the reductions, the fft transforms)."""

import textwrap


def paragraph(text, indent=4):
    """``text`` as a paragraph of a NumPy-style docstring section: wrapped to 96 columns and
    indented, each inline literal (````x.sum(dim=0)````) kept on one line."""
    parts = text.split("``")
    text = "``".join(p.replace(" ", "\0") if i % 2 else p for i, p in enumerate(parts))
    pad = " " * indent
    return textwrap.fill(text, 96, initial_indent=pad, subsequent_indent=pad).replace("\0", " ")


def reflow(doc):
    """``doc`` with each paragraph that has a line over 96 columns rewrapped at its indentation
    (examples, ``>>>`` lines and their output, are left as they are)."""
    out, para = [], []

    def flush():
        if para:
            long = any(len(line) > 96 for line in para)
            indent = len(para[0]) - len(para[0].lstrip())
            out.extend(paragraph(" ".join(p.strip() for p in para), indent).split("\n")
                       if long else para)
            para.clear()

    in_example = False
    for line in doc.split("\n"):
        stripped = line.strip()
        in_example = stripped.startswith(">>>") or (in_example and stripped != "")
        same = para and len(line) - len(line.lstrip()) == len(para[0]) - len(para[0].lstrip())
        if not stripped or in_example or not same:
            flush()
        if stripped and not in_example:
            para.append(line)
        else:
            out.append(line)
    flush()
    return "\n".join(out)
