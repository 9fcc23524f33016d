"""Corpus BLEU and the tokenisation every tfnlp text metric shares."""

import collections
import math
import unicodedata

from tfnlp import _checks

# CJK ideograph blocks, the ranges BERT's basic tokenizer splits one character at a time.
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _is_cjk(char):
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK_RANGES)


def tokenize_for_evaluation(text, lower_case=True):
    """Splits text into words and single punctuation characters, for scoring.

    The rule, applied in this order:

    1. `bytes` are decoded as UTF-8, invalid bytes becoming U+FFFD.
    2. Unicode NFC normalisation (canonical composition only: a decomposed
       "e" + U+0301 equals "é"; compatibility characters such as fullwidth
       letters or ligatures are kept as they are).
    3. If `lower_case`, `str.lower()`. Accents are kept ("é" is not "e").
    4. Whitespace, separators, control and format characters (Unicode
       categories `Z*`, `Cc`, `Cf`) end the current token and are dropped.
    5. A run of letters, digits and combining marks (categories `L*`, `N*`,
       `M*`) is one word, except that each CJK ideograph (the blocks BERT
       treats as Chinese characters) is a token of its own.
    6. Every other character (punctuation, symbols, emoji, U+FFFD, ...) is a
       token of its own. A combining mark right after such a character (an
       emoji variation selector, say) stays attached to it.

    So "don't" gives `don ' t` and "3.14" gives `3 . 14`, as BERT's basic
    tokenizer splits them.

    Args:
        text: `str`, or `bytes` holding UTF-8.
        lower_case: bool, lower-case the text first.

    Returns:
        A list of `str` tokens (empty for empty or whitespace-only text).

    Example:

    >>> tokenize_for_evaluation("Héllo, World!  It's 3.14 你好 🙂")
    ['héllo', ',', 'world', '!', 'it', "'", 's', '3', '.', '14', '你', '好', '🙂']
    >>> tokenize_for_evaluation(b"Caf\\xc3\\xa9 au lait", lower_case=False)
    ['Café', 'au', 'lait']
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    elif not isinstance(text, str):
        raise TypeError(f"`text` must be str or bytes, got {type(text).__name__}.")
    text = unicodedata.normalize("NFC", text)
    if lower_case:
        text = text.lower()
    tokens = []
    in_word = False  # the last token is a word a letter may extend
    attached = False  # the last character belongs to the last token
    for char in text:
        category = unicodedata.category(char)
        if category[0] == "Z" or category in ("Cc", "Cf") or char.isspace():
            in_word = attached = False
        elif category[0] == "M" and attached:
            tokens[-1] += char
        elif category[0] in "LNM" and not _is_cjk(char):
            if in_word:
                tokens[-1] += char
            else:
                tokens.append(char)
            in_word = attached = True
        else:
            tokens.append(char)
            in_word, attached = False, True
    return tokens


def _check_corpus(references, hypotheses):
    """Validates the corpus; returns (list of reference lists, list of hypotheses)."""
    for name, value in (("references", references), ("hypotheses", hypotheses)):
        if isinstance(value, (str, bytes)):
            raise ValueError(f"`{name}` must be a list of texts, not a single text.")
    references, hypotheses = list(references), list(hypotheses)
    if len(references) != len(hypotheses):
        raise ValueError(
            f"`references` and `hypotheses` must have the same length, got "
            f"{len(references)} references and {len(hypotheses)} hypotheses."
        )
    for i, hypothesis in enumerate(hypotheses):
        if not isinstance(hypothesis, (str, bytes)):
            raise ValueError(
                f"`hypotheses[{i}]` must be str or bytes, got {type(hypothesis).__name__}."
            )
    reference_lists = []
    for i, reference in enumerate(references):
        if isinstance(reference, (str, bytes)):
            reference = [reference]
        elif (
            isinstance(reference, (list, tuple))
            and reference
            and all(isinstance(r, (str, bytes)) for r in reference)
        ):
            reference = list(reference)
        else:
            raise ValueError(
                f"`references[{i}]` must be a text or a non-empty list of texts, "
                f"got {reference!r:.80}."
            )
        reference_lists.append([_as_text(r) for r in reference])
    return reference_lists, [_as_text(h) for h in hypotheses]


def _as_text(text):
    """`str`, UTF-8 `bytes` decoded, so that any `tokenize` (e.g. `str.split`) takes it."""
    return text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text


def _check_tokenize(tokenize):
    if not callable(tokenize):
        raise ValueError(f"`tokenize` must be callable, got {tokenize!r:.80}.")


def _ngrams(tokens, max_order):
    """Counter of all n-grams (tuples) with 1 <= n <= max_order."""
    return collections.Counter(
        tuple(tokens[i : i + n])
        for n in range(1, max_order + 1)
        for i in range(len(tokens) - n + 1)
    )


def _closest_length(hypothesis_length, reference_lengths):
    """The reference length closest to the hypothesis length; the shorter on ties."""
    return min(reference_lengths, key=lambda length: (abs(length - hypothesis_length), length))


def corpus_bleu_details(
    references, hypotheses, max_order=4, smooth=False, tokenize=tokenize_for_evaluation
):
    """Corpus BLEU with its parts: n-gram precisions and brevity penalty.

    Standard corpus-level BLEU (Papineni et al., 2002), as sacrebleu computes
    it on already tokenised text (`tokenize="none"`): clipped n-gram matches
    and n-gram counts are summed over the whole corpus before the precisions
    p_n are taken; BLEU = BP * exp(mean_n log p_n), n = 1..`max_order`. The
    brevity penalty BP = exp(1 - r / c) when c < r (else 1), where c is the
    total hypothesis length and r the total reference length; with several
    references per hypothesis, n-gram counts are clipped by the largest count
    in any one reference and r adds, for each hypothesis, the length of the
    reference closest to it in length (the shorter one on ties).

    Without smoothing, any order with no match (or no n-gram at all, as in a
    corpus of hypotheses shorter than `max_order` tokens) gives 0.0. An empty
    corpus, or one whose hypotheses are all empty, gives 0.0; never NaN.

    Args:
        references: a list of reference texts, one per hypothesis, or a list
            of lists of reference texts (several references per hypothesis;
            lists may differ in length). Texts are `str` or UTF-8 `bytes`.
        hypotheses: a list of hypothesis texts (`str` or UTF-8 `bytes`;
            `bytes` are decoded, invalid sequences replaced by U+FFFD,
            before `tokenize` sees them, as are references).
        max_order: int >= 1, the longest n-gram counted.
        smooth: bool, add one to the matches and to the n-gram count of every
            order n > 1 (Lin and Och, 2004; sacrebleu's
            `smooth_method="add-k"`, `smooth_value=1`). A corpus with no
            unigram match still scores 0.0.
        tokenize: callable, a text to a list of tokens;
            `tokenize_for_evaluation` by default (`str.split` for text that is
            already tokenised).

    Returns:
        A dict: `bleu` (float in [0, 100]), `precisions` (list of `max_order`
        floats in [0, 100], smoothed if `smooth`), `brevity_penalty` (float in
        [0, 1]), `hypothesis_length` and `reference_length` (ints, c and r).

    Example:

    >>> details = corpus_bleu_details(["the cat sat on the mat"], ["the cat sat on a mat"])
    >>> [round(p, 2) for p in details["precisions"]]
    [83.33, 60.0, 50.0, 33.33]
    >>> details["brevity_penalty"], details["hypothesis_length"], details["reference_length"]
    (1.0, 6, 6)
    """
    max_order = _checks.positive_int("max_order", max_order)
    _check_tokenize(tokenize)
    reference_lists, hypotheses = _check_corpus(references, hypotheses)

    matches = [0] * max_order
    totals = [0] * max_order
    hypothesis_length = reference_length = 0
    for reference_list, hypothesis in zip(reference_lists, hypotheses, strict=True):
        hypothesis_tokens = list(tokenize(hypothesis))
        reference_counts = collections.Counter()
        reference_lengths = []
        for reference in reference_list:
            reference_tokens = list(tokenize(reference))
            reference_lengths.append(len(reference_tokens))
            reference_counts |= _ngrams(reference_tokens, max_order)  # max count per n-gram
        hypothesis_length += len(hypothesis_tokens)
        reference_length += _closest_length(len(hypothesis_tokens), reference_lengths)
        for ngram, count in _ngrams(hypothesis_tokens, max_order).items():
            totals[len(ngram) - 1] += count
            matches[len(ngram) - 1] += min(count, reference_counts[ngram])

    if hypothesis_length >= reference_length:
        brevity_penalty = 1.0
    elif hypothesis_length > 0:
        brevity_penalty = math.exp(1.0 - reference_length / hypothesis_length)
    else:
        brevity_penalty = 0.0
    if smooth:
        matches = matches[:1] + [m + 1 for m in matches[1:]]
        totals = totals[:1] + [t + 1 for t in totals[1:]]
    precisions = [100.0 * m / t if t else 0.0 for m, t in zip(matches, totals, strict=True)]
    if matches[0] == 0 or min(precisions) == 0.0:
        bleu = 0.0
    else:
        log_mean = sum(math.log(p / 100.0) for p in precisions) / max_order
        bleu = 100.0 * brevity_penalty * math.exp(log_mean)
    return {
        "bleu": bleu,
        "precisions": precisions,
        "brevity_penalty": brevity_penalty,
        "hypothesis_length": hypothesis_length,
        "reference_length": reference_length,
    }


def corpus_bleu(
    references, hypotheses, max_order=4, smooth=False, tokenize=tokenize_for_evaluation
):
    """Corpus-level BLEU score in [0, 100].

    The `bleu` entry of `corpus_bleu_details`, which documents the formula
    (clipped n-gram precisions summed over the corpus, geometric mean,
    brevity penalty from the corpus lengths, closest reference length with
    several references) and its edge cases (an empty corpus or all-empty
    hypotheses give 0.0).

    Args:
        references: a list of reference texts, one per hypothesis, or a list
            of lists of reference texts (several references per hypothesis).
        hypotheses: a list of hypothesis texts (`str` or UTF-8 `bytes`;
            `bytes` are decoded, invalid sequences replaced by U+FFFD,
            before `tokenize` sees them, as are references).
        max_order: int >= 1, the longest n-gram counted.
        smooth: bool, add-one smoothing of the orders n > 1 (Lin and Och,
            2004).
        tokenize: callable, a text to a list of tokens
            (`tokenize_for_evaluation` by default).

    Returns:
        A float in [0, 100].

    Example:

    >>> corpus_bleu(["The cat sat on the mat."], ["the cat sat on the mat ."])
    100.0
    >>> round(corpus_bleu(["the cat sat on the mat"], ["the cat sat on a mat"]), 2)
    53.73
    >>> references = [["a cat is on the mat", "there is a cat on the mat"]]
    >>> round(corpus_bleu(references, ["a cat on the mat"]), 2)
    81.87
    >>> corpus_bleu(["the cat sat on the mat"], [""])
    0.0
    """
    return corpus_bleu_details(references, hypotheses, max_order, smooth, tokenize)["bleu"]
