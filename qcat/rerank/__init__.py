"""The learned second stage (issue 32): candidates from every part and from a catalog-neighbour
vote (a BM25 index shipped in the bundle), features per candidate, and boosted trees walked by numba."""
