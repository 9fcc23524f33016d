"""Entity-level scores and token accuracy: hand-computed cases, and parity with `seqeval`'s
default (conlleval) mode on random, malformed and exotic tag sequences."""

import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfnlp import metrics
from tfnlp.metrics import entity_report, entity_spans, token_accuracy

FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
TYPES = ("PER", "LOC", "ORG")
# Tags outside IOB/IOBES that seqeval still reads by its rules: no prefix ("PER" is
# prefix P, type ER; "ORG" is an O of type RG), bare prefixes, conlleval's ".",
# an empty type, a "-" inside the type, a non-ASCII prefix.
EXOTIC = ("PER", "ORG", "MISC", "B", "I", "E", "S", "X", ".", ".-PER", "O-PER", "B-", "X-",
          "B-PER-X", "I-PER-X", "É-PER", "BPER")


@pytest.fixture
def seqeval():
    return pytest.importorskip("seqeval.metrics.sequence_labeling")


def _quiet(function, *args, **kwargs):
    """An oracle call without seqeval's warnings (tags "not NE", undefined scores, empty means)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


@st.composite
def tag_alphabets(draw, prefixes="BI", exotic=False):
    """"O" and the prefixed tags of 2 or 3 types; with `exotic`, EXOTIC too."""
    types = draw(st.lists(st.sampled_from(TYPES), min_size=2, max_size=3, unique=True))
    tags = ["O"] + [f"{p}-{t}" for p in prefixes for t in types]
    return tags + list(EXOTIC) if exotic else tags


def sentences(alphabet, max_sentences=5, max_length=12):
    sentence = st.lists(st.sampled_from(alphabet), max_size=max_length)
    return st.lists(sentence, max_size=max_sentences)


@st.composite
def tagged_corpora(draw, prefixes="BI"):
    """(true_tags, pred_tags): random sentences; each predicted tag is the true one or random."""
    alphabet = draw(tag_alphabets(prefixes))
    tag = st.sampled_from(alphabet)
    corpus = draw(st.lists(st.lists(st.tuples(tag, st.one_of(st.none(), tag)), max_size=12),
                           min_size=1, max_size=6))  # seqeval refuses no sentence
    true = [[t for t, _ in sentence] for sentence in corpus]
    pred = [[t if p is None else p for t, p in sentence] for sentence in corpus]
    return true, pred


def _seqeval_spans(seqeval, tags):
    """seqeval's entities with an exclusive end."""
    return [(t, start, end + 1) for t, start, end in _quiet(seqeval.get_entities, tags)]


def _flat(spans_per_sentence, corpus):
    """Per-sentence spans at seqeval's positions: the sentences joined with one "O" between."""
    flat, offset = [], 0
    for spans, sentence in zip(spans_per_sentence, corpus, strict=True):
        flat += [(t, start + offset, end + offset) for t, start, end in spans]
        offset += len(sentence) + 1
    return flat


HAND_SPANS = [
    ([], []),
    (["O", "O"], []),
    (["B-PER", "I-PER", "O", "B-LOC"], [("PER", 0, 2), ("LOC", 3, 4)]),
    (["B-PER", "B-PER", "I-PER"], [("PER", 0, 1), ("PER", 1, 3)]),
    # conlleval's repairs: an I- without a B-, after O, and a type switch inside an entity.
    (["I-PER", "I-PER", "O", "I-LOC"], [("PER", 0, 2), ("LOC", 3, 4)]),
    (["B-PER", "I-LOC", "I-LOC"], [("PER", 0, 1), ("LOC", 1, 3)]),
    (["I-PER", "I-ORG", "B-ORG", "I-PER"], [("PER", 0, 1), ("ORG", 1, 2), ("ORG", 2, 3),
                                           ("PER", 3, 4)]),
    # IOBES: E- closes, S- stands alone, an E- without a B- starts and ends an entity.
    (["B-PER", "I-PER", "E-PER", "S-LOC", "E-LOC", "I-LOC"], [("PER", 0, 3), ("LOC", 3, 4),
                                                               ("LOC", 4, 5), ("LOC", 5, 6)]),
    # A tag without a prefix: "PER" reads as prefix P of type ER, "ORG" as an O.
    (["PER", "PER", "ORG", "LOC"], [("ER", 0, 2), ("OC", 3, 4)]),
    (["B", "I", "O", "B-"], [("_", 0, 2), ("_", 3, 4)]),
    # After an E-, a same-type tag that starts nothing: seqeval reports from the last start.
    (["E-PER", "X-PER", "O"], [("PER", 0, 1), ("PER", 0, 2)]),
    # conlleval's "." neither starts an entity nor ends one by changing type.
    (["B-PER", ".-LOC", "O", "B-LOC"], [("PER", 0, 1), ("LOC", 3, 4)]),
]


@pytest.mark.parametrize("tags,expected", HAND_SPANS)
def test_spans_by_hand(tags, expected):
    assert entity_spans(tags) == expected


@pytest.mark.parametrize("tags,expected", HAND_SPANS)
def test_the_hand_made_spans_are_seqevals(seqeval, tags, expected):
    assert _seqeval_spans(seqeval, tags) == expected


@FUZZ
@given(st.data())
def test_spans_equal_seqevals_on_random_sequences(seqeval, data):
    alphabet = data.draw(tag_alphabets(prefixes="BIES", exotic=True))
    tags = data.draw(st.lists(st.sampled_from(alphabet), max_size=16))
    assert entity_spans(tags) == _seqeval_spans(seqeval, tags)


@FUZZ
@given(st.data())
def test_spans_of_sentences_equal_seqevals(seqeval, data):
    alphabet = data.draw(tag_alphabets(prefixes="BIES")) + ["PER", "ORG", "B", "I"]
    corpus = data.draw(sentences(alphabet))
    spans = entity_spans(corpus)
    assert len(spans) == len(corpus)
    assert _flat(spans, corpus) == _seqeval_spans(seqeval, corpus)


@FUZZ
@given(st.data())
def test_spans_never_cross_sentences_where_seqevals_can(seqeval, data):
    """With "." prefixes or bare non-IOB tags, seqeval can start an entity in one sentence and
    end it in a later one; here each sentence is chunked alone: the same entities, clipped."""
    corpus = data.draw(sentences(data.draw(tag_alphabets(prefixes="BIES", exotic=True))))
    spans = entity_spans(corpus)
    assert spans == [entity_spans(sentence) for sentence in corpus]
    starts = np.cumsum([0] + [len(s) + 1 for s in corpus])
    clipped = []
    for t, start, end in _seqeval_spans(seqeval, corpus):
        sentence_start = starts[np.searchsorted(starts, end - 1, side="right") - 1]
        clipped.append((t, max(start, int(sentence_start)), end))
    assert _flat(spans, corpus) == clipped


def test_seqeval_lets_an_entity_cross_sentences_and_this_does_not(seqeval):
    corpus = [["B-PER"], [".-PER", "I-PER"]]
    assert _seqeval_spans(seqeval, corpus) == [("PER", 0, 1), ("PER", 0, 4)]
    assert entity_spans(corpus) == [[("PER", 0, 1)], [("PER", 0, 2)]]


def _assert_scores_equal(ours, theirs):
    assert set(theirs) == {"precision", "recall", "f1-score", "support"}
    for key in ("precision", "recall"):
        assert math.isclose(ours[key], theirs[key], rel_tol=0, abs_tol=1e-12), key
    assert math.isclose(ours["f1"], theirs["f1-score"], rel_tol=0, abs_tol=1e-12)
    assert ours["support"] == theirs["support"]


@FUZZ
@given(data=st.data(), prefixes=st.sampled_from(["BI", "BIES"]))
def test_report_equals_seqevals(seqeval, data, prefixes):
    true, pred = data.draw(tagged_corpora(prefixes))
    report = entity_report(true, pred)
    expected = _quiet(seqeval.classification_report, true, pred, output_dict=True)
    averages = {"micro": "micro avg", "macro": "macro avg", "weighted": "weighted avg"}
    assert list(report["per_type"]) == [k for k in expected if k not in averages.values()]
    for type_, scores in report["per_type"].items():
        _assert_scores_equal(scores, expected[type_])
    for ours, theirs in averages.items():
        if ours == "macro" and not report["per_type"]:  # seqeval: the mean of no type, NaN
            assert report["macro"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
            assert math.isnan(expected[theirs]["f1-score"])
            continue
        _assert_scores_equal(report[ours], expected[theirs])
    for key, score in (("f1", seqeval.f1_score), ("precision", seqeval.precision_score),
                       ("recall", seqeval.recall_score)):
        assert math.isclose(report["micro"][key], _quiet(score, true, pred), rel_tol=0,
                            abs_tol=1e-12)
        assert math.isclose(report["weighted"][key], _quiet(score, true, pred, average="weighted"),
                            rel_tol=0, abs_tol=1e-12)
    if any(true):
        assert token_accuracy(true, pred) == pytest.approx(seqeval.accuracy_score(true, pred),
                                                           rel=0, abs=1e-12)
    else:  # seqeval divides by zero
        assert token_accuracy(true, pred) == 0.0


def test_report_by_hand():
    true = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC"], ["B-ORG", "O", "B-PER"]]
    pred = [["B-PER", "I-PER", "O", "B-LOC", "O"], ["I-ORG", "B-MISC", "B-PER"]]
    report = entity_report(true, pred)
    assert list(report["per_type"]) == ["LOC", "MISC", "ORG", "PER"]
    assert report["per_type"]["PER"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 2}
    # LOC is cut short: predicted once, wrong.
    assert report["per_type"]["LOC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    # An I-ORG without B-ORG is an ORG entity (conlleval), found.
    assert report["per_type"]["ORG"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1}
    # MISC is predicted, never true: support 0, scored 0, and counted in the macro mean.
    assert report["per_type"]["MISC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    assert report["micro"] == {"precision": 3 / 5, "recall": 3 / 4, "f1": pytest.approx(2 / 3),
                               "support": 4}
    assert report["macro"] == {"precision": 0.5, "recall": 0.5, "f1": 0.5, "support": 4}
    assert report["weighted"] == {"precision": 0.75, "recall": 0.75, "f1": 0.75, "support": 4}
    assert token_accuracy(true, pred) == 5 / 8


def test_no_true_entity_and_no_entity_at_all_score_zero():
    report = entity_report([["O", "O"]], [["B-PER", "O"]])
    zero = {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    assert report == {"per_type": {"PER": zero}, "micro": zero, "macro": zero, "weighted": zero}
    for true, pred in (([["O"]], [["O"]]), ([], []), ([[]], [[]])):
        assert entity_report(true, pred) == {"per_type": {}, "micro": zero, "macro": zero,
                                             "weighted": zero}
    assert token_accuracy([], []) == 0.0 and token_accuracy([[], []], [[], []]) == 0.0
    assert token_accuracy([["O"], []], [["O"], []]) == 1.0


def test_numpy_arrays_bytes_and_tuples_read_as_lists_of_str():
    true = [["B-PER", "I-PER", "O"], ["B-LOC", "O", "O"]]
    pred = [["B-PER", "O", "O"], ["B-LOC", "O", "B-ORG"]]
    expected = entity_report(true, pred)
    for convert in (np.array, lambda c: np.array(c, dtype=bytes),
                    lambda c: [tuple(t.encode() for t in s) for s in c],
                    lambda c: tuple(np.array(s, dtype=object) for s in c)):
        report = entity_report(convert(true), convert(pred))
        assert report == expected
        assert json.loads(json.dumps(report)) == report
        assert token_accuracy(convert(true), convert(pred)) == 2 / 3
        assert entity_spans(convert(true)) == [[("PER", 0, 2)], [("LOC", 0, 1)]]
    assert entity_spans(np.array(["B-PER", "O"])) == [("PER", 0, 1)]
    ((type_, _, _),) = entity_spans(np.array([b"B-PER"]))
    assert type(type_) is str and type_ == "PER"
    assert type(expected["micro"]["support"]) is int and type(expected["micro"]["f1"]) is float


@pytest.mark.parametrize(
    "true,pred,error,pattern",
    [
        ([["O"], ["O"]], [["O"]], ValueError,
         r"`true_tags` and `pred_tags` must have the same number of sentences, got 2 and 1"),
        ([["O"], ["B-PER", "O"]], [["O"], ["B-PER"]], ValueError,
         r"`pred_tags\[1\]` has 1 tags but `true_tags\[1\]` has 2: sentence 1"),
        (["B-PER", "O"], ["B-PER", "O"], TypeError,
         r"`true_tags\[0\]` must be a sequence of tags, not a single str \(one sentence\? wrap it"),
        ([["O"]], "O", TypeError, r"`pred_tags` must be a sequence of sentences, not a single str"),
        ([["O"]], 3, TypeError, r"`pred_tags` must be a sequence, got int"),
        ([["O"]], [[None]], TypeError, r"`pred_tags\[0\]\[0\]` must be a str tag, got None"),
        ([["O", 1]], [["O", "O"]], TypeError, r"`true_tags\[0\]\[1\]` must be a str tag, got 1"),
        ([["O", ""]], [["O", "O"]], ValueError, r"`true_tags\[0\]\[1\]` is an empty tag"),
    ],
)
@pytest.mark.parametrize("function", [entity_report, token_accuracy])
def test_bad_arguments_are_named(function, true, pred, error, pattern):
    with pytest.raises(error, match=pattern):
        function(true, pred)


@pytest.mark.parametrize(
    "tags,error,pattern",
    [
        ("B-PER", TypeError, r"`tags` must be a sequence of tags, not a single str"),
        (None, TypeError, r"`tags` must be a sequence, got NoneType"),
        (["O", ["B-PER"]], TypeError,
         r"`tags` must be one sentence .* or a sequence of sentences, got a mix: `tags\[0\]` is"
         r" 'O' but `tags\[1\]` is not a tag"),
        ([["O"], ["O", ""]], ValueError, r"`tags\[1\]\[1\]` is an empty tag"),
        (["O", b""], ValueError, r"`tags\[1\]` is an empty tag"),
    ],
)
def test_bad_tags_are_named(tags, error, pattern):
    with pytest.raises(error, match=pattern):
        entity_spans(tags)


def test_reexported_from_tfnlp_metrics():
    for function in (entity_report, entity_spans, token_accuracy):
        assert getattr(metrics, function.__name__) is function
        assert function.__name__ in metrics.__all__
