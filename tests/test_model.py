import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from qcat.models.model import top_k


def test_ties_break_by_lower_index():
    scores = np.array([[1.0, 3.0, 3.0, 2.0, 3.0]])
    labels, values = top_k(scores, 2)
    assert labels.tolist() == [[1, 2]] and values.tolist() == [[3.0, 3.0]]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 6), st.integers(1, 40)),
              elements=st.sampled_from([0.0, 1.0, 2.0, 0.5, -1.0])), st.integers(1, 45))
def test_equals_a_stable_full_sort(scores, k):
    labels, values = top_k(scores, k)
    expected = np.argsort(-scores, axis=1, kind="stable")[:, : min(k, scores.shape[1])]
    assert np.array_equal(labels, expected)
    assert np.array_equal(values, np.take_along_axis(scores, expected, axis=1))
