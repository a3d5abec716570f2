"""Colourings of sparsity patterns: which columns (or rows) of a Jacobian can share one product,
and which columns of a Hessian can (NOTE [colourings]).

NOTE [colourings]
-----------------
A Jacobian's columns ``j`` and ``k`` can be pushed forward by one tangent (the sum of their unit
vectors) when no row has a nonzero in both: each entry of the compressed product is then one
entry of the Jacobian. So a column colouring is a colouring of the column intersection graph
(columns adjacent where they share a row: the pattern ``P.T @ P``), i.e. a distance-2 colouring of
the bipartite row/column graph; a row colouring for reverse mode is the same on ``P.T``. We colour
greedily, in largest-first order (most neighbours first), over the CSR arrays of that graph.

A Hessian is symmetric: ``H[i, j]`` may be read from the product of ``j``'s colour (row ``i``)
or, the same number, from ``i``'s colour (row ``j``). A star colouring (a distance-1 colouring in
which every path on four vertices has three colours) guarantees that one of the two is free of
other columns of that colour, so it needs fewer colours than a distance-2 colouring of the
adjacency graph. The greedy star colouring below forbids, for each vertex, the colours that
would close a two-coloured path through it; ``recoverable`` checks the result against the exact
condition the decompression relies on, and where it would fail (never seen on the tests' or the
benchmarks' patterns) the distance-2 colouring, always valid, is used instead.

Measured against networkx's ``greedy_color`` (largest_first) on the column graph of the 8,192-
unknown Brusselator (benchmarks/sparse_jacobians.py prints both): the same 12 colours, the
Python loop this code had then about twice as fast, and networkx first needs its own graph
object, built from the CSR arrays in about ten times the colouring's time. So the few lines
here, with no dependency but NumPy and SciPy's CSR arrays, are what colours; the greedy loop is
C (``arrayad/_core/_graphs.pyx``): in Python it took 2.8 ms of the 2,048-unknown Brusselator's
sparse Jacobian (detection, colouring and evaluation: 7-8 ms), more than the evaluation.
"""

import numpy as np


def _adjacency(graph):
    """(indptr, indices) int64 arrays of a square CSR graph without its diagonal."""
    g = graph.tocsr()
    g.sum_duplicates()   # (canonical: sorted, no duplicate)
    rows = np.repeat(np.arange(g.shape[0]), np.diff(g.indptr))
    keep = g.indices != rows   # (a vertex is not its own neighbour)
    indptr = np.zeros(g.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows[keep], minlength=g.shape[0]), out=indptr[1:])
    return indptr, g.indices[keep].astype(np.int64)


def _largest_first(indptr):
    deg = np.diff(indptr)
    # (stable: ties keep the natural order, so the colouring is deterministic)
    return np.argsort(-deg, kind="stable")


def greedy_coloring(graph, order=None):
    """A distance-1 colouring of the symmetric CSR ``graph``: an int array, the smallest colour
    that no coloured neighbour has, vertex by vertex in ``order`` (largest-first by default)."""
    from .._core._graphs import greedy_colors
    indptr, indices = _adjacency(graph)
    order = _largest_first(indptr) if order is None else order
    return greedy_colors(indptr, indices, np.ascontiguousarray(order, dtype=np.int64))


def column_coloring(pattern):
    """Colours of the columns of a boolean CSR ``pattern`` such that no row has two nonzeros of
    one colour (a distance-2 colouring: NOTE [colourings])."""
    p = pattern.astype(bool).tocsr()
    return greedy_coloring((p.T @ p).tocsr())


def star_coloring(pattern):
    """A colouring of the symmetric boolean ``pattern`` from which every entry can be read
    directly off the compressed Hessian-vector products (NOTE [colourings])."""
    p = pattern.astype(bool).tocsr()
    p = (p + p.T).tocsr()
    indptr, indices = _adjacency(p)
    n = len(indptr) - 1
    order = _largest_first(indptr).tolist()
    indptr, indices = indptr.tolist(), indices.tolist()   # (a Python loop reads them below)
    colors = [-1] * n
    mark = [-1] * (n + 1)
    # count[x][c]: how many coloured neighbours of x have colour c (so that "x has a neighbour
    # other than w with w's colour" is one lookup: count >= 2, w being one of them)
    count = [{} for _ in range(n)]
    for v in order:
        nbrs = indices[indptr[v]:indptr[v + 1]]
        for w in nbrs:
            cw = colors[w]
            if cw >= 0:
                mark[cw] = v
        for w in nbrs:
            cw = colors[w]
            for x in indices[indptr[w]:indptr[w + 1]]:
                cx = colors[x]
                if x == v or cx < 0:
                    continue
                if cw < 0 or count[x].get(cw, 0) >= 2:
                    # w uncoloured: v and x at distance 2 must differ, or w could close a
                    # two-coloured path whatever colour it gets; w coloured: v taking x's
                    # colour would make v-w-x-y two-coloured, y another neighbour of x with
                    # w's colour
                    mark[cx] = v
        c = 0
        while mark[c] == v:
            c += 1
        colors[v] = c
        for u in nbrs:
            cu = count[u]
            cu[c] = cu.get(c, 0) + 1
    colors = np.asarray(colors, dtype=np.int64)
    if n and not recoverable(p, colors, symmetric=True):
        colors = greedy_coloring((p @ p + p).tocsr())   # (distance 2: always recoverable)
    return colors


def _counts(pattern, colors):
    """For each nonzero (i, j) of the CSR ``pattern``: how many nonzeros of row i have the colour
    of column j."""
    import scipy.sparse as sp
    m, n = pattern.shape
    k = int(colors.max(initial=-1)) + 1
    rows = np.repeat(np.arange(m), np.diff(pattern.indptr))
    want = colors[pattern.indices]
    if m * k <= 20_000_000:   # (a dense rows x colours table: one sparse product)
        onehot = sp.csr_array((np.ones(n, np.int32), colors, np.arange(n + 1)), shape=(n, k))
        table = (sp.csr_array((np.ones(pattern.nnz, np.int32), pattern.indices,
                               pattern.indptr), shape=(m, n)) @ onehot).toarray()
        return table[rows, want]
    _, inverse, counts = np.unique(rows * k + want, return_inverse=True, return_counts=True)
    return counts[inverse]


def direct_sources(pattern, colors, symmetric=False):
    """For each nonzero (i, j) of the sorted CSR ``pattern`` (in its order): whether it can be
    read at row i of column j's colour (no other nonzero of row i has that colour), and, where
    ``symmetric``, whether at row j of column i's colour (the transposed entry's test). Returns
    (from_own_row, from_transposed_row) boolean arrays (the second None unless ``symmetric``)."""
    own = _counts(pattern, colors) == 1
    if not symmetric:
        return own, None
    n = pattern.shape[0]
    rows = np.repeat(np.arange(n), np.diff(pattern.indptr))
    keys = rows * n + pattern.indices      # (sorted: CSR with sorted indices)
    where_t = np.searchsorted(keys, pattern.indices * n + rows)
    return own, own[np.minimum(where_t, len(own) - 1)]


def recoverable(pattern, colors, symmetric=False):
    """Whether every nonzero of the CSR ``pattern`` (symmetric ones: a symmetric pattern) can be
    read off the compressed products of the column colouring ``colors`` (NOTE [colourings])."""
    p = pattern.tocsr()
    p.sort_indices()
    if p.nnz == 0:
        return True
    if len(colors) != p.shape[1]:
        return False
    own, transposed = direct_sources(p, np.asarray(colors), symmetric)
    return bool(own.all() if transposed is None else (own | transposed).all())
