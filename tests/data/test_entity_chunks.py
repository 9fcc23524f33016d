"""`entity_chunks` (graph) == `tfnlp.metrics.entity_spans` (Python, seqeval's default mode) row
by row: every sequence of up to 4 IOBES tags of 2 types, random padded batches (eager, in a
`tf.function` of unknown shape, through a SavedModel), edge cases, and bad arguments."""

import itertools

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from tfnlp.data.entity_chunks import entity_chunks, entity_type_names, is_entity_tag_set
from tfnlp.metrics import entity_spans

FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None)
IOB2 = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
IOBES = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]
TAG_SETS = {
    "iob2_2_types": IOB2,
    "iob2_3_types": IOB2 + ["B-ORG", "I-ORG"],
    "iobes_2_types": IOBES,
    # Ids in no particular order; types with "-" and "_" in them, not in sorted order.
    "iobes_shuffled": ["S-_", "I-ORG-X", "O", "B-PER", "E-ORG-X", "I-PER", "B-ORG-X", "E-_",
                       "S-PER", "B-_", "I-_"],
}
SIGNATURE = [tf.TensorSpec([None, None], tf.int32)]
KEYS = ("types", "starts", "ends", "counts")


def padded(rows, width=None):
    """Rows of tag ids as an int32 (B, W) array, -1 after each row's words."""
    width = max(map(len, rows), default=0) if width is None else width
    ids = np.full((len(rows), width), -1, np.int32)
    for b, row in enumerate(rows):
        ids[b, : len(row)] = row
    return ids


def expected_chunks(ids, names):
    """`entity_chunks`' result computed with `entity_spans` row by row, as NumPy arrays."""
    types = entity_type_names(names)
    spans = [entity_spans([names[i] for i in row if i >= 0]) for row in np.asarray(ids)]
    width = max(map(len, spans), default=0)
    result = {key: np.full((len(spans), width), -1, np.int32) for key in KEYS[:3]}
    for b, row in enumerate(spans):
        for e, (type_, start, end) in enumerate(row):
            result["types"][b, e] = types.index(type_)
            result["starts"][b, e], result["ends"][b, e] = start, end
    result["counts"] = np.array([len(row) for row in spans], np.int32).reshape(len(spans))
    return result


def assert_chunks_equal(actual, expected):
    assert sorted(actual) == sorted(KEYS)
    for key in KEYS:
        assert actual[key].dtype == tf.int32, key
        np.testing.assert_array_equal(actual[key].numpy(), expected[key], err_msg=key)
        assert actual[key].shape == expected[key].shape, key


_GRAPH_FUNCTIONS = {}


def graph_chunks(ids, names):
    """`entity_chunks` through a `tf.function` of unknown B and W, traced once per tag set."""
    key = tuple(names)
    if key not in _GRAPH_FUNCTIONS:
        _GRAPH_FUNCTIONS[key] = tf.function(lambda t: entity_chunks(t, names),
                                            input_signature=SIGNATURE)
    return _GRAPH_FUNCTIONS[key](tf.constant(ids, tf.int32))


def test_every_iobes_sequence_up_to_4_words_matches_entity_spans():
    """All 9^0 + ... + 9^4 = 7381 sequences of 2 types' IOBES tags (IOB2 and IOB1 among
    them, and every malformed one), one row each of one batch, eager and in the graph."""
    rows = [r for n in range(5) for r in itertools.product(range(len(IOBES)), repeat=n)]
    ids = padded(rows)
    expected = expected_chunks(ids, IOBES)
    assert expected["counts"].max() == 4 and ids.shape == (7381, 4)
    assert_chunks_equal(entity_chunks(ids, IOBES), expected)
    assert_chunks_equal(graph_chunks(ids, IOBES), expected)


@st.composite
def batches(draw, num_tags):
    """Rows of random ids (malformed sequences included) of random lengths, padded to W."""
    rows = draw(st.lists(st.lists(st.integers(0, num_tags - 1), max_size=20), max_size=6))
    width = max(map(len, rows), default=0) + draw(st.integers(0, 3))
    return padded(rows, width)


@pytest.mark.parametrize("tag_set", TAG_SETS)
@FUZZ
@given(data=st.data())
def test_random_batches_match_entity_spans(tag_set, data):
    names = TAG_SETS[tag_set]
    ids = data.draw(batches(len(names)))
    expected = expected_chunks(ids, names)
    assert_chunks_equal(entity_chunks(tf.constant(ids), names), expected)
    assert_chunks_equal(graph_chunks(ids, names), expected)


def test_hand_computed_entities():
    names = ["O", "B-LOC", "B-PER", "I-PER", "I-LOC", "E-PER", "S-LOC"]
    rows = [
        [2, 3, 0, 1],  # B-PER I-PER O B-LOC: PER 0-2, LOC 3-4
        [3, 3, 4, 0, 4],  # I-PER I-PER I-LOC O I-LOC: I- starts after nothing, O, a type switch
        [6, 2, 5, 5],  # S-LOC B-PER E-PER E-PER: the second E- after E- starts its own
        [],  # no word
        [0, 0, 0],  # all O
        [4],  # one word
    ]
    chunks = entity_chunks(padded(rows, width=6), names)
    assert entity_type_names(names) == ["LOC", "PER"]
    assert chunks["counts"].numpy().tolist() == [2, 3, 3, 0, 0, 1]
    assert chunks["types"].numpy().tolist() == [
        [1, 0, -1], [1, 0, 0], [0, 1, 1], [-1] * 3, [-1] * 3, [0, -1, -1]]
    assert chunks["starts"].numpy().tolist() == [
        [0, 3, -1], [0, 2, 4], [0, 1, 3], [-1] * 3, [-1] * 3, [0, -1, -1]]
    assert chunks["ends"].numpy().tolist() == [
        [2, 4, -1], [2, 3, 5], [1, 3, 4], [-1] * 3, [-1] * 3, [1, -1, -1]]


@pytest.mark.parametrize(
    "rows, width",
    [
        ([["I-PER"]], None),  # single word, I- first
        ([["O", "I-PER", "I-PER"]], None),  # I- after O
        ([["B-PER", "I-LOC", "E-PER", "B-LOC", "B-LOC"]], None),  # type switches, B- after B-
        ([["E-PER", "S-PER", "I-PER", "S-LOC", "E-LOC", "O"]], None),  # IOBES out of order
        ([["B-PER", "I-PER", "E-PER"], ["S-LOC"]], 3),  # a row fills W: entity ends at W
        ([[], ["O", "O"], []], None),  # no entity at all: E = 0
        ([[], [], []], 0),  # W = 0
        ([], 0),  # zero rows, W = 0
        ([], 7),  # zero rows
    ],
)
def test_edge_cases_match_entity_spans(rows, width):
    ids = padded([[IOBES.index(t) for t in row] for row in rows], width)
    expected = expected_chunks(ids, IOBES)
    assert expected["types"].shape[0] == len(rows)
    assert_chunks_equal(entity_chunks(ids, IOBES), expected)
    assert_chunks_equal(graph_chunks(ids, IOBES), expected)


def test_only_o_tag_set_and_unknown_rank():
    ids = tf.constant([[0, 0, -1]])
    chunks = tf.function(lambda t: entity_chunks(t, ["O"]),
                         input_signature=[tf.TensorSpec(None, tf.int32)])(ids)
    assert entity_type_names(["O"]) == []
    assert chunks["types"].shape == (1, 0) and chunks["counts"].numpy().tolist() == [0]


class _Chunker(tf.Module):
    def __init__(self, names):
        super().__init__()
        self.names = names

    @tf.function(input_signature=SIGNATURE)
    def __call__(self, tag_ids):
        return entity_chunks(tag_ids, self.names)


def test_savedmodel_round_trip(tmp_path):
    names = TAG_SETS["iobes_shuffled"]
    tf.saved_model.save(_Chunker(names), str(tmp_path))
    reloaded = tf.saved_model.load(str(tmp_path))
    rng = np.random.default_rng(0)
    for batch, width in ((5, 9), (2, 30), (0, 4)):  # batch sizes and lengths of all kinds
        rows = [rng.integers(0, len(names), rng.integers(0, width + 1)) for _ in range(batch)]
        ids = padded(rows, width)
        assert_chunks_equal(reloaded(tf.constant(ids)), expected_chunks(ids, names))


@pytest.mark.parametrize(
    "tag_names, expected",
    [
        (["NOUN", "VERB", "DET", "ADJ"], False),  # UPOS
        (["NN", "VB", "O"], False),
        (IOB2, True),
        (IOBES, True),
        (["O", "I-PER", "B-PER"], True),  # IOB1 uses the same names
        (["O"], True),
        (("O", b"B-PER", np.str_("I-PER")), True),  # bytes, NumPy strings, a tuple
        (np.array(["O", "B-MISC", "I-MISC"]), True),
        (["O", "B-"], False),  # empty type
        (["O", "PER"], False),  # no prefix
        (["O", "X-PER"], False),  # another prefix
        (["O", "L-PER", "U-PER"], False),  # BILOU's letters
        (["O", "BPER"], False),
        (["o", "B-PER"], False),
        (["O", 3], False),
        ([], False),
    ],
)
def test_is_entity_tag_set(tag_names, expected):
    assert is_entity_tag_set(tag_names) is expected


def test_type_names_sorted_and_distinct():
    assert entity_type_names(TAG_SETS["iobes_shuffled"]) == ["ORG-X", "PER", "_"]
    assert entity_type_names(["O", "S-b", "B-B", "I-b"]) == ["B", "b"]


@pytest.mark.parametrize(
    "tag_ids, error, match",
    [
        (tf.constant([[0.0, 1.0]]), TypeError, "`tag_ids` must be an int32"),
        (tf.constant([[0, 1]], tf.int64), TypeError, "`tag_ids` must be an int32"),
        (tf.constant([0, 1]), ValueError, r"`tag_ids` must be an int32 tensor \(B, W\)"),
        (tf.constant([[[0, 1]]]), ValueError, r"`tag_ids` must be an int32 tensor \(B, W\)"),
        (tf.constant([[0, 5]]), ValueError, r"`tag_ids` must be in \[-1, 5\).*got 5"),
        (tf.constant([[-2, 0]]), ValueError, r"`tag_ids` must be in \[-1, 5\).*got -2"),
    ],
)
def test_bad_tag_ids(tag_ids, error, match):
    with pytest.raises(error, match=match):
        entity_chunks(tag_ids, IOB2)


def test_out_of_range_ids_in_the_graph():
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"`tag_ids` must be in \[-1, 5\)"):
        graph_chunks([[0, 7]], IOB2)


@pytest.mark.parametrize(
    "tag_names, error, match",
    [
        (["O", "NOUN"], ValueError, r"`tag_names\[1\]` is 'NOUN'"),
        (["O", "B-"], ValueError, r"`tag_names\[1\]` is 'B-'"),
        ([], ValueError, "`tag_names` must name at least one tag"),
        ("B-PER", TypeError, "`tag_names` must be a sequence of tag names, not a single str"),
        (5, TypeError, "`tag_names` must be a sequence of tag names, got int"),
    ],
)
def test_bad_tag_names(tag_names, error, match):
    with pytest.raises(error, match=match):
        entity_chunks(tf.constant([[0]]), tag_names)
    with pytest.raises(error, match=match):
        entity_type_names(tag_names)
