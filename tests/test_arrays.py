"""podsim.arrays.unique against NumPy's own np.unique (what it replaces on the hot paths)."""

from __future__ import annotations

import numpy as np

from podsim.arrays import unique


def test_unique_is_numpys_unique_of_integer_arrays() -> None:
    rng = np.random.default_rng(7)
    for size, high in ((0, 5), (1, 5), (2, 1), (1000, 10), (5000, 1 << 40)):
        a = rng.integers(-high, high, size, dtype=np.int64)
        got = unique(a)
        assert got.dtype == a.dtype and np.array_equal(got, np.unique(a))
    # a 2-D array is flattened, as np.unique does
    m = np.array([[3, 1], [3, 2]])
    assert unique(m).tolist() == [1, 2, 3]
