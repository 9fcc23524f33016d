"""Parity of tfnlp.metrics with sacrebleu and Google's rouge-score, and edge cases."""

import math

import pytest
from rouge_score import rouge_scorer
from sacrebleu.metrics import BLEU

from tfnlp import datasets
from tfnlp.metrics import corpus_bleu, corpus_bleu_details, rouge_scores, tokenize_for_evaluation

HAND_MADE = [
    ("Le café était très bon, n'est-ce pas ?", "Le cafe\u0301 était bon, n'est-ce pas?"),
    ("我们今天去北京。", "我们明天去北京！"),
    ("Great job 🎉🎉 see you soon 🙂", "great job 🎉 see you later 🙂"),
    ("Straße № 5 — „Zitat“ ½", "strasse Nr. 5 - „Zitat“"),
    ("Ça coûte 3,50 € (TTC).", "ça coûte 3.50 € ttc"),
]


def _corpus(name):
    """(references, hypotheses) of real text; the references are lists for "multi"."""
    if name in ("bible", "bible_truncated", "multi"):
        pairs = datasets.read_text_pairs("bible_archaic_modern", "test")[:40]
        hypotheses = [archaic for archaic, _ in pairs]
        references = [modern for _, modern in pairs]
        if name == "bible_truncated":  # shorter hypotheses: a brevity penalty < 1
            hypotheses = [" ".join(h.split()[: len(h.split()) * 2 // 3]) for h in hypotheses]
        if name == "multi":
            references = [
                [r, references[(i + 1) % len(references)]] for i, r in enumerate(references)
            ]
        return references, hypotheses
    if name == "zh_poems":
        lines = [s for d in datasets.read_documents("zh_poems", "test")[:10] for s in d[2:]][:40]
        return lines, ["".join(c for i, c in enumerate(line) if i % 5 != 3) for line in lines]
    if name == "hand_made":
        return [r for r, _ in HAND_MADE], [h for _, h in HAND_MADE]
    raise ValueError(name)


CORPORA = ["bible", "bible_truncated", "multi", "zh_poems", "hand_made"]


def _pretokenized(text):
    return " ".join(tokenize_for_evaluation(text))


@pytest.mark.parametrize("smooth", [False, True])
@pytest.mark.parametrize("max_order", [1, 2, 4])
@pytest.mark.parametrize("name", CORPORA)
def test_corpus_bleu_matches_sacrebleu(name, max_order, smooth):
    references, hypotheses = _corpus(name)
    streams = [[refs] if isinstance(refs, str) else refs for refs in references]
    streams = [[_pretokenized(refs[k]) for refs in streams] for k in range(len(streams[0]))]
    oracle = BLEU(
        tokenize="none",
        smooth_method="add-k" if smooth else "none",
        smooth_value=1 if smooth else None,
        max_ngram_order=max_order,
        force=True,
    ).corpus_score([_pretokenized(h) for h in hypotheses], streams)

    details = corpus_bleu_details(references, hypotheses, max_order=max_order, smooth=smooth)
    assert oracle.score > 1.0  # the corpus is not degenerate
    assert details["bleu"] == pytest.approx(oracle.score, abs=1e-9)
    assert details["precisions"] == pytest.approx(oracle.precisions, abs=1e-9)
    assert details["brevity_penalty"] == pytest.approx(oracle.bp, abs=1e-12)
    assert (details["hypothesis_length"], details["reference_length"]) == (
        oracle.sys_len,
        oracle.ref_len,
    )
    assert corpus_bleu(references, hypotheses, max_order, smooth) == details["bleu"]
    if name == "bible_truncated":
        assert details["brevity_penalty"] < 0.9


def test_corpus_bleu_with_whitespace_tokenisation_matches_sacrebleu():
    references, hypotheses = _corpus("bible")
    oracle = BLEU(tokenize="none", smooth_method="none", force=True)
    expected = oracle.corpus_score(hypotheses, [references]).score
    assert corpus_bleu(references, hypotheses, tokenize=str.split) == pytest.approx(
        expected, abs=1e-9
    )


class _Tokenizer:
    def tokenize(self, text):
        return tokenize_for_evaluation(text)


@pytest.mark.parametrize("name", CORPORA)
def test_rouge_scores_match_rouge_score(name):
    references, hypotheses = _corpus(name)
    scorer = rouge_scorer.RougeScorer(
        ["rouge1", "rouge2", "rougeL"], use_stemmer=False, tokenizer=_Tokenizer()
    )
    per_example = [
        scorer.score_multi(refs, hyp) if isinstance(refs, list) else scorer.score(refs, hyp)
        for refs, hyp in zip(references, hypotheses, strict=True)
    ]
    scores = rouge_scores(references, hypotheses)
    assert sorted(scores) == ["rouge1", "rouge2", "rougeL"]
    for key, value in scores.items():
        expected = 100 * sum(s[key].fmeasure for s in per_example) / len(per_example)
        assert 1.0 < value < 100.0
        assert value == pytest.approx(expected, abs=1e-9), key


@pytest.mark.parametrize("name", CORPORA)
def test_identical_corpus_scores_100(name):
    references, _ = _corpus(name)
    hypotheses = [refs[0] if isinstance(refs, list) else refs for refs in references]
    assert corpus_bleu(references, hypotheses) == pytest.approx(100.0)
    assert rouge_scores(references, hypotheses) == pytest.approx(
        {"rouge1": 100.0, "rouge2": 100.0, "rougeL": 100.0}
    )


@pytest.mark.parametrize("smooth", [False, True])
def test_no_overlap_scores_0(smooth):
    references = ["the cat sat on the mat", "猫在垫子上"]
    hypotheses = ["a dog ran in a park", "狗跑了"]
    assert corpus_bleu(references, hypotheses, smooth=smooth) == 0.0
    assert rouge_scores(references, hypotheses) == {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}


@pytest.mark.parametrize("length", [4, 7, 10, 15])
def test_short_hypothesis_gets_the_brevity_penalty(length):
    reference = " ".join(f"w{i}" for i in range(16))
    hypothesis = " ".join(reference.split()[:length])  # every n-gram matches
    details = corpus_bleu_details([reference], [hypothesis])
    assert details["brevity_penalty"] == pytest.approx(math.exp(1 - 16 / length))
    assert details["bleu"] == pytest.approx(100 * math.exp(1 - 16 / length))
    assert details["precisions"] == [100.0] * 4


def test_closest_reference_length_is_used_with_several_references():
    references = [["a b c d e f g h", "a b c d x", "a b c d e f"]]
    details = corpus_bleu_details(references, ["a b c d e"])
    assert details["reference_length"] == 5  # 5 and 6 both differ by <= 1: 5 is closest
    details = corpus_bleu_details([["a b c d e f g", "a b c"]], ["a b c d e"])
    assert details["reference_length"] == 3  # tie between 3 and 7: the shorter one
    assert details["brevity_penalty"] == 1.0


@pytest.mark.parametrize(
    "references, hypotheses",
    [([], []), (["the cat"], [""]), (["", ""], ["", "  "]), (["the cat", "a dog"], ["", ""])],
    ids=["empty_corpus", "empty_hypothesis", "all_empty", "all_hypotheses_empty"],
)
def test_empty_inputs_score_0(references, hypotheses):
    for smooth in (False, True):
        details = corpus_bleu_details(references, hypotheses, smooth=smooth)
        assert details["bleu"] == 0.0 and details["hypothesis_length"] == 0
        assert all(math.isfinite(v) for v in [details["brevity_penalty"], *details["precisions"]])
    assert rouge_scores(references, hypotheses) == {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}


def test_smoothing_rescues_a_missing_order():
    # No 4-gram matches: unsmoothed BLEU is 0, smoothed is (add-one for n > 1) positive.
    references, hypotheses = ["the cat sat on the mat"], ["the cat on sat the mat"]
    assert corpus_bleu(references, hypotheses) == 0.0
    precisions = [6 / 6, (2 + 1) / (5 + 1), (0 + 1) / (4 + 1), (0 + 1) / (3 + 1)]
    expected = 100 * math.prod(precisions) ** 0.25
    assert corpus_bleu(references, hypotheses, smooth=True) == pytest.approx(expected)


@pytest.mark.parametrize(
    "text, lower_case, expected",
    [
        ("Hello, World!", True, ["hello", ",", "world", "!"]),
        ("Hello, World!", False, ["Hello", ",", "World", "!"]),
        ("don't stop", True, ["don", "'", "t", "stop"]),
        ("pi is 3.14", True, ["pi", "is", "3", ".", "14"]),
        ("cafe\u0301 café", True, ["café", "café"]),  # NFC: decomposed == composed
        ("ÉCOLE", True, ["école"]),  # accents are kept
        ("我爱北京天安门", True, ["我", "爱", "北", "京", "天", "安", "门"]),
        ("tfnlp是库", True, ["tfnlp", "是", "库"]),
        ("こんにちは世界", True, ["こんにちは", "世", "界"]),  # kana are letters; ideographs split
        ("ok👍🏽!!", True, ["ok", "👍", "🏽", "!", "!"]),
        ("❤\ufe0f you", True, ["❤\ufe0f", "you"]),  # the variation selector stays attached
        ("नमस्ते दुनिया", True, ["नमस्ते", "दुनिया"]),  # combining vowel signs stay in the word
        (" a\tb\nc\u00a0d\u200be\u3000f ", True, ["a", "b", "c", "d", "e", "f"]),
        ("snake_case", True, ["snake", "_", "case"]),
        ("", True, []),
        (" \t\n", True, []),
        (b"Caf\xc3\xa9!", True, ["café", "!"]),
        (b"ab\xffcd", True, ["ab", "\ufffd", "cd"]),  # invalid UTF-8 becomes U+FFFD
    ],
)
def test_tokenize_for_evaluation(text, lower_case, expected):
    assert tokenize_for_evaluation(text, lower_case=lower_case) == expected


def test_tokenize_for_evaluation_rejects_other_types():
    with pytest.raises(TypeError, match="`text`"):
        tokenize_for_evaluation(["a list"])


def test_bytes_and_str_score_the_same():
    references, hypotheses = zip(*HAND_MADE, strict=True)
    as_bytes = [r.encode() for r in references], [h.encode() for h in hypotheses]
    assert corpus_bleu(*as_bytes) == corpus_bleu(references, hypotheses) > 0
    assert rouge_scores(*as_bytes) == rouge_scores(references, hypotheses)
    # Also with a tokenizer for str only, as the docstrings suggest for
    # tokenised text; invalid UTF-8 is replaced, as by the default tokenizer.
    for metric in (corpus_bleu, rouge_scores):
        assert metric(*as_bytes, tokenize=str.split) == metric(references, hypotheses, tokenize=str.split)
    assert corpus_bleu([b"a \xff b c d"], [b"a \xff b c d"], tokenize=str.split) == 100.0


def _bleu(references, hypotheses, **kwargs):
    return corpus_bleu(references, hypotheses, **kwargs)


@pytest.mark.parametrize("metric", [_bleu, rouge_scores], ids=["corpus_bleu", "rouge_scores"])
@pytest.mark.parametrize(
    "references, hypotheses, kwargs, message",
    [
        (["a", "b"], ["a"], {}, "`references` and `hypotheses` must have the same length"),
        (["a"], "a", {}, "`hypotheses` must be a list"),
        ("a", ["a"], {}, "`references` must be a list"),
        (["a", None], ["a", "b"], {}, r"`references\[1\]`"),
        (["a", []], ["a", "b"], {}, r"`references\[1\]`"),
        (["a", "b"], ["a", 3], {}, r"`hypotheses\[1\]`"),
        (["a"], ["a"], {"tokenize": "split"}, "`tokenize` must be callable"),
    ],
)
def test_bad_arguments_raise_value_errors_naming_them(
    metric, references, hypotheses, kwargs, message
):
    with pytest.raises(ValueError, match=message):
        metric(references, hypotheses, **kwargs)


@pytest.mark.parametrize("max_order", [0, -1, 2.0, True, None])
def test_bad_max_order_raises(max_order):
    with pytest.raises(ValueError, match="`max_order`"):
        corpus_bleu(["a"], ["a"], max_order=max_order)
