"""Head/torso/tail and query-length segments."""

from __future__ import annotations

import numpy as np
import pytest

from qcat.measure.segments import LENGTH_BINS, segment_by_impressions, segment_by_length


def test_segment_by_impressions_hand_computed() -> None:
    # Sorted: 50 (starts at 0.0 -> head), 20 (0.5 -> torso), 20 (0.7 -> tail), 10 (0.9 -> tail).
    assert segment_by_impressions(np.array([10, 50, 20, 20])).tolist() == [2, 0, 1, 2]
    # A start exactly on a boundary belongs to the later segment: starts 0, .3, .6, .9.
    assert segment_by_impressions(np.array([3, 3, 3, 1])).tolist() == [0, 1, 2, 2]
    # Ties go by index; a query straddling a boundary stays in the earlier segment.
    assert segment_by_impressions(np.array([5, 5, 5, 5])).tolist() == [0, 0, 1, 2]
    assert segment_by_impressions(np.array([1.0, 9.0]), shares=(0.5, 0.5)).tolist() == [1, 0]
    assert segment_by_impressions(np.array([])).tolist() == []
    with pytest.raises(ValueError):
        segment_by_impressions(np.array([1.0]), shares=(0.5, 0.4))


def test_segment_by_length() -> None:
    assert segment_by_length(np.array([1, 2, 3, 4, 5, 9])).tolist() == [0, 1, 2, 3, 4, 4]
    assert [LENGTH_BINS[b] for b in segment_by_length(np.array([7, 1]))] == ["5+", "1"]
    with pytest.raises(ValueError):
        segment_by_length(np.array([0]))
