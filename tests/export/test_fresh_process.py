"""The property check itself: it must fail on a signature that misbehaves."""

import numpy as np
import pytest

from tests.export.fresh_process import check_any_batch_is_served


def _fake_signature(bad, drop_a_row=False):
    """A 'served' signature returning a NaN (or one row too few) when some text is bad."""

    def process(signature, text):
        scores = np.zeros((len(text), 2), "float32")
        for i, t in enumerate(text):
            if bad(t):
                scores[i, 0] = np.nan
        if drop_a_row and any(bad(t) for t in text):
            scores = np.zeros((len(text) - 1, 2), "float32")
        return {"scores": scores}

    return process


@pytest.mark.parametrize("bad", [
    lambda t: isinstance(t, bytes) and b"\xff" in t,  # invalid UTF-8
    lambda t: len(t) >= 1_000_000,  # the 1 MB texts
    lambda t: "\x00" in t if isinstance(t, str) else b"\x00" in t,
])
def test_the_check_finds_a_signature_that_fails_on_some_text(bad):
    with pytest.raises(AssertionError):
        check_any_batch_is_served(_fake_signature(bad), "serving_default", ["text"], lambda o, b: None)


def test_the_check_finds_a_signature_that_drops_a_row():
    with pytest.raises(AssertionError):
        check_any_batch_is_served(_fake_signature(lambda t: t == "", drop_a_row=True),
                                  "serving_default", ["text"], lambda o, b: None)


def test_the_check_passes_a_well_behaved_signature_and_tries_every_batch_size():
    sizes = set()

    def check(outputs, batch):
        sizes.add(batch)

    check_any_batch_is_served(_fake_signature(lambda t: False), "serving_default", ["text"], check)
    assert sizes == {0, 1, 2, 3, 4}
