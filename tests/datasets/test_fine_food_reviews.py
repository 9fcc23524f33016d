import doctest

import numpy as np
import pytest

from tfnlp import datasets


def _collect(split):
    texts, labels = zip(*[(t.numpy(), int(y)) for t, y in datasets.load_fine_food_reviews(split)], strict=True)
    return texts, np.array(labels)


def test_splits_are_fixed_disjoint_and_complete():
    splits = {name: _collect(name) for name in ("train", "validation", "test")}
    assert [len(splits[n][0]) for n in ("train", "validation", "test")] == [3606, 394, 1000]
    train, validation = set(splits["train"][0]), set(splits["validation"][0])
    assert not train & validation
    for texts, labels in splits.values():
        assert set(labels) == {0, 1}
        assert 0.6 < labels.mean() < 0.7  # ~65% "great"
        assert all(t.strip() for t in texts)
    assert splits["train"][0][0] == _collect("train")[0][0]  # deterministic order


def test_bad_split():
    with pytest.raises(ValueError, match="split"):
        datasets.load_fine_food_reviews("dev")


def test_docstring_examples():
    results = doctest.testmod(datasets)
    assert results.failed == 0 and results.attempted > 0, results
