# cython: boundscheck=False, wraparound=False
"""Greedy colouring of a graph given by its CSR arrays (NOTE [colourings] in
``arrayad/_sparsity/coloring.py``): the loop over vertices in C. In Python the loop cost 2.8 ms
on the 2,048-unknown Brusselator's column graph, more than finding the pattern and evaluating
the compressed Jacobian together; here it is a few microseconds."""

import numpy as np
cimport numpy as cnp

cnp.import_array()


def greedy_colors(const cnp.int64_t[::1] indptr, const cnp.int64_t[::1] indices,
                  const cnp.int64_t[::1] order):
    """The distance-1 greedy colouring of the graph of CSR arrays ``indptr``, ``indices`` (a
    vertex listed as its own neighbour is ignored: it is uncoloured when it is coloured):
    vertex by vertex in ``order``, the smallest colour that no coloured neighbour has. Returns
    an int64 array of colours (-1 for a vertex not in ``order``)."""
    cdef Py_ssize_t n = indptr.shape[0] - 1, k, p, v, c
    if n < 0 or order.shape[0] > n:
        raise ValueError(f"greedy_colors: {order.shape[0]} vertices ordered of {n}")
    colors_array = np.full(n, -1, dtype=np.int64)
    mark_array = np.full(n + 1, -1, dtype=np.int64)   # (mark[c] == v: c is a neighbour's)
    cdef cnp.int64_t[::1] colors = colors_array
    cdef cnp.int64_t[::1] mark = mark_array
    for k in range(order.shape[0]):
        v = order[k]
        if not 0 <= v < n or colors[v] >= 0:
            raise ValueError(f"greedy_colors: vertex {v} is not one of 0..{n - 1} ordered once")
        if not 0 <= indptr[v] <= indptr[v + 1] <= indices.shape[0]:
            raise ValueError(f"greedy_colors: indptr[{v}:{v + 2}] out of the indices' range")
        for p in range(indptr[v], indptr[v + 1]):
            c = indices[p]
            if not 0 <= c < n:
                raise ValueError(f"greedy_colors: neighbour {c} is not one of 0..{n - 1}")
            c = colors[c]
            if c >= 0:
                mark[c] = v
        c = 0
        while mark[c] == v:
            c += 1
        colors[v] = c
    return colors_array
