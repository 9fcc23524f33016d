"""ROUGE-1, ROUGE-2 and ROUGE-L F-measures, averaged over a corpus."""

import collections

from tfnlp.metrics.bleu import _check_corpus, _check_tokenize, tokenize_for_evaluation


def _f_measure(overlap, hypothesis_count, reference_count):
    precision = overlap / max(hypothesis_count, 1)
    recall = overlap / max(reference_count, 1)
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def _rouge_n(reference_tokens, hypothesis_tokens, n):
    reference = collections.Counter(
        tuple(reference_tokens[i : i + n]) for i in range(len(reference_tokens) - n + 1)
    )
    hypothesis = collections.Counter(
        tuple(hypothesis_tokens[i : i + n]) for i in range(len(hypothesis_tokens) - n + 1)
    )
    overlap = sum((reference & hypothesis).values())
    return _f_measure(overlap, sum(hypothesis.values()), sum(reference.values()))


def _lcs_length(a, b):
    """Length of the longest common subsequence of two token lists."""
    previous = [0] * (len(b) + 1)
    for token in a:
        current = [0]
        for j, other in enumerate(b):
            current.append(previous[j] + 1 if token == other else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def _rouge_l(reference_tokens, hypothesis_tokens):
    if not reference_tokens or not hypothesis_tokens:
        return 0.0
    lcs = _lcs_length(reference_tokens, hypothesis_tokens)
    return _f_measure(lcs, len(hypothesis_tokens), len(reference_tokens))


def rouge_scores(references, hypotheses, tokenize=tokenize_for_evaluation):
    """Corpus-averaged ROUGE-1, ROUGE-2 and ROUGE-L F-measures (x100).

    Computed as Google's `rouge-score` package computes them without
    stemming (`RougeScorer(["rouge1", "rouge2", "rougeL"])`), but with
    `tokenize` splitting the text: for each pair, ROUGE-N is the F-measure of
    the clipped n-gram overlap (precision over the hypothesis n-grams, recall
    over the reference n-grams) and ROUGE-L the F-measure of the longest
    common subsequence of the two token lists (sentence level, not the
    summary-level `rougeLsum`). The F-measures are averaged over the pairs.
    With several references, each score is the best one over the references
    (`RougeScorer.score_multi`). A pair where either side has no n-gram
    scores 0 for that n; an empty corpus gives 0.0 for every score.

    Args:
        references: a list of reference texts, one per hypothesis, or a list
            of lists of reference texts. Texts are `str` or UTF-8 `bytes`.
        hypotheses: a list of hypothesis texts (`str` or UTF-8 `bytes`;
            `bytes` are decoded, invalid sequences replaced by U+FFFD,
            before `tokenize` sees them, as are references).
        tokenize: callable, a text to a list of tokens;
            `tokenize_for_evaluation` by default.

    Returns:
        A dict with the floats in [0, 100] `rouge1`, `rouge2` and `rougeL`.

    Example:

    >>> scores = rouge_scores(["the cat sat on the mat"], ["the cat is on the mat"])
    >>> {name: round(score, 2) for name, score in scores.items()}
    {'rouge1': 83.33, 'rouge2': 60.0, 'rougeL': 83.33}
    >>> rouge_scores([], [])
    {'rouge1': 0.0, 'rouge2': 0.0, 'rougeL': 0.0}
    """
    _check_tokenize(tokenize)
    reference_lists, hypotheses = _check_corpus(references, hypotheses)
    sums = {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}
    for reference_list, hypothesis in zip(reference_lists, hypotheses, strict=True):
        hypothesis_tokens = list(tokenize(hypothesis))
        best = dict.fromkeys(sums, 0.0)
        for reference in reference_list:
            reference_tokens = list(tokenize(reference))
            scores = {
                "rouge1": _rouge_n(reference_tokens, hypothesis_tokens, 1),
                "rouge2": _rouge_n(reference_tokens, hypothesis_tokens, 2),
                "rougeL": _rouge_l(reference_tokens, hypothesis_tokens),
            }
            best = {name: max(best[name], scores[name]) for name in sums}
        for name in sums:
            sums[name] += best[name]
    count = max(len(hypotheses), 1)
    return {name: 100.0 * total / count for name, total in sums.items()}
