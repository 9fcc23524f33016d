"""Entity-level scores of tag sequences (conlleval's chunks, as seqeval reads them), token accuracy.

Pure Python: no TensorFlow, no NumPy needed (NumPy arrays of tags are accepted).
"""

# How a tag reads (seqeval's default mode, after conlleval): its first character is
# the prefix, its type is what follows the first "-" after that character (the whole
# rest when there is none), "_" when that is empty. A chunk ends before a token
# (`_ends`) and one starts at it (`_starts`) by the rules below; "O" and "." are the
# two prefixes that neither end a chunk by changing type nor start one.
_OUTSIDE = frozenset("O.")
_SINGLE_OR_LAST = frozenset("ES")
_BEGINNING = frozenset("BS")
_INSIDE = frozenset("IE")
_NO_CHUNK_BEFORE_INSIDE = frozenset("OES")  # an I- or E- after these starts a chunk
_OPEN = frozenset("BI")
_CLOSING_AFTER_OPEN = frozenset("BSO")


def _prefix_and_type(tag):
    rest = tag[1:]
    before, dash, after = rest.partition("-")
    return tag[0], (after if dash else before) or "_"


def _ends(previous, previous_type, prefix, type_):
    """Whether a chunk ends between the previous token and this one."""
    if previous in _SINGLE_OR_LAST:
        return True
    if previous in _OPEN and prefix in _CLOSING_AFTER_OPEN:
        return True
    return previous not in _OUTSIDE and previous_type != type_


def _starts(previous, previous_type, prefix, type_):
    """Whether a chunk starts at this token."""
    if prefix in _BEGINNING:
        return True
    if prefix in _INSIDE and previous in _NO_CHUNK_BEFORE_INSIDE:
        return True
    return prefix not in _OUTSIDE and previous_type != type_


def _chunks(tags):
    """[(type, start, end)] of one sentence of non-empty str tags, `end` exclusive."""
    spans = []
    previous, previous_type, start = "O", "", 0  # seqeval's state before the first token
    for i, tag in enumerate([*tags, "O"]):  # the "O" after the last token closes any chunk
        prefix, type_ = _prefix_and_type(tag)
        if _ends(previous, previous_type, prefix, type_):
            spans.append((previous_type, start, i))
        if _starts(previous, previous_type, prefix, type_):
            start = i
        previous, previous_type = prefix, type_
    return spans


def entity_spans(tags):
    """The entities (chunks) of a tag sequence, as `seqeval` finds them by default.

    Tags are read as conlleval and `seqeval`'s default mode
    (`seqeval.metrics.sequence_labeling.get_entities`) read them, so scores
    built on these spans equal theirs. A tag's first character is its prefix
    and its type is what follows the first "-" after it: "B-PER" is (B, PER),
    "I-ORG-X" is (I, ORG-X), "O" is (O, _). An entity

    - ends before a token when the previous token is E- or S-, when a B- or I-
      is followed by B-, S- or O, or when the type changes after any prefix
      but O and "." (conlleval's "no chunk" tag);
    - starts at every B- and S-, at an I- or E- after O, E- or S-, and at any
      token but O or "." whose type differs from the previous token's.

    So malformed IOB2 is repaired as conlleval repairs it: an I- without a
    B- starts an entity, and a type switch inside one (B-PER I-ORG) ends it
    and starts another. IOB1 and IOBES (E-, S-) tags read the same way.
    Tags outside these schemes are read by the same rules, so a tag without
    a prefix such as "PER" is the prefix "P" of type "ER" (seqeval warns
    about such tags; this function does not), and with prefixes other than
    B, I, E, S and O an entity can end without a new one having started: it
    is then reported from the last start, as seqeval does, which can
    overlap the entity reported before it.

    Positions count tokens from 0; `end` is exclusive (`tags[start:end]` are
    the entity's tags; seqeval's end is inclusive, `end - 1`).

    A list of sentences is chunked sentence by sentence, each as if it were
    alone, so no entity crosses a sentence boundary. seqeval joins the
    sentences with an "O" between them, which gives the same entities for
    tags in the B-/I-/E-/S-/O schemes; only tags outside them (a "." prefix,
    a bare "X") can make seqeval's entities run across sentences, and here
    such an entity starts at its sentence's first token instead.

    Args:
        tags: one sentence, a sequence of non-empty `str` (or UTF-8 `bytes`)
            tags, e.g. a list or a 1-D NumPy array; or a sequence of such
            sentences.

    Returns:
        For one sentence, a list of `(type, start, end)` tuples in the order
        the entities end (`type` a str, `start` and `end` ints). For a list
        of sentences, one such list per sentence, positions counted within
        the sentence.

    Example:

    >>> entity_spans(["B-PER", "I-PER", "O", "B-LOC"])
    [('PER', 0, 2), ('LOC', 3, 4)]
    >>> entity_spans(["I-PER", "I-PER", "I-LOC", "O", "B-ORG", "I-PER"])  # malformed IOB2
    [('PER', 0, 2), ('LOC', 2, 3), ('ORG', 4, 5), ('PER', 5, 6)]
    >>> entity_spans(["S-LOC", "B-PER", "E-PER"])  # IOBES
    [('LOC', 0, 1), ('PER', 1, 3)]
    >>> entity_spans([["B-PER", "I-PER"], ["I-PER", "O"]])
    [[('PER', 0, 2)], [('PER', 0, 1)]]
    """
    if isinstance(tags, (str, bytes)):
        raise TypeError(f"`tags` must be a sequence of tags, not a single {type(tags).__name__}.")
    items = _as_list("tags", tags)
    is_tag = [isinstance(item, (str, bytes)) for item in items]
    if all(is_tag):
        return _chunks(_checked_sentence("tags", items))
    if any(is_tag):
        first = is_tag.index(True)
        raise TypeError(
            f"`tags` must be one sentence (a sequence of str tags) or a sequence of sentences, "
            f"got a mix: `tags[{first}]` is {items[first]!r:.80} but `tags[{is_tag.index(False)}]` "
            f"is not a tag."
        )
    return [_chunks(s) for s in _checked_sentences("tags", items)]


def entity_report(true_tags, pred_tags):
    """Entity-level precision, recall, F1 and support per type, and their averages.

    An entity counts as found when the predicted tags give an entity of the
    same type over exactly the same tokens of the same sentence; entities
    are read by `entity_spans`. The numbers equal `seqeval`'s default mode:
    `seqeval.metrics.classification_report(true_tags, pred_tags,
    output_dict=True)`, and `f1_score`, `precision_score`, `recall_score`
    (whose default average is "micro"); see `entity_spans` for the one kind
    of (non-IOB) tag sequence where seqeval's entities can differ.

    The types scored are those of the true or the predicted entities, in
    sorted order. A score whose denominator is 0 is 0.0, seqeval's default
    (`zero_division="warn"`, without the warning): precision of a type never
    predicted, recall of a type with no true entity, F1 when precision and
    recall are both 0. F1 is 2 P R / (P + R). The averages:

    - `micro`: from the total counts of entities found, predicted and true;
    - `macro`: the unweighted mean over the types;
    - `weighted`: the mean weighted by each type's support; 0.0 when there
      is no true entity at all (as seqeval).

    Every `support` is a number of true entities (the averages': all of
    them). With no entity in either argument, or no sentence, `per_type` is
    empty and every average is 0.0 with support 0 (seqeval's macro average
    is NaN there, and it refuses an empty list of sentences).

    Args:
        true_tags: a sequence of sentences, each a sequence of non-empty
            `str` (or UTF-8 `bytes`) tags: lists, tuples or NumPy arrays.
        pred_tags: the predicted tags, as many sentences as `true_tags` and
            as many tags in each sentence.

    Returns:
        A JSON-serialisable dict: `per_type` (`{type: {"precision",
        "recall", "f1", "support"}}`, types sorted) and `micro`, `macro`,
        `weighted` (each `{"precision", "recall", "f1", "support"}`);
        scores are floats, supports ints.

    Raises:
        ValueError: if the numbers of sentences differ, or the numbers of
            tags of a sentence (the message names the sentence), or a tag is
            an empty string.
        TypeError: if an argument is not a sequence of sentences of str tags.

    Example:

    >>> true = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    >>> pred = [["B-PER", "I-PER", "O", "B-ORG"], ["I-ORG", "O"]]
    >>> report = entity_report(true, pred)
    >>> report["per_type"]["ORG"]
    {'precision': 0.5, 'recall': 1.0, 'f1': 0.6666666666666666, 'support': 1}
    >>> report["per_type"]["LOC"]  # never predicted
    {'precision': 0.0, 'recall': 0.0, 'f1': 0.0, 'support': 1}
    >>> report["micro"]
    {'precision': 0.6666666666666666, 'recall': 0.6666666666666666, 'f1': 0.6666666666666666,
     'support': 3}
    >>> round(report["macro"]["f1"], 4)
    0.5556
    """
    true_tags, pred_tags = _checked_pair(true_tags, pred_tags)
    true_entities, pred_entities = {}, {}
    for entities, sentences in ((true_entities, true_tags), (pred_entities, pred_tags)):
        for i, sentence in enumerate(sentences):
            for type_, start, end in _chunks(sentence):
                entities.setdefault(type_, set()).add((i, start, end))

    types = sorted(true_entities.keys() | pred_entities.keys())
    counts = []  # (found, predicted, true) per type
    for type_ in types:
        gold, guessed = true_entities.get(type_, set()), pred_entities.get(type_, set())
        counts.append((len(gold & guessed), len(guessed), len(gold)))
    per_type = {type_: _scores(*c) for type_, c in zip(types, counts, strict=True)}
    found, predicted, true = (sum(c[k] for c in counts) for k in range(3))
    rows = list(per_type.values())
    return {
        "per_type": per_type,
        "micro": _scores(found, predicted, true),
        "macro": _mean(rows, [1] * len(rows), support=true),
        "weighted": _mean(rows, [row["support"] for row in rows], support=true),
    }


def token_accuracy(true_tags, pred_tags):
    """The fraction of tokens whose predicted tag is the true tag (e.g. part-of-speech tags).

    Tags are compared as strings, over all tokens of all sentences (a
    micro average), as `seqeval.metrics.accuracy_score` does. With no token
    at all the accuracy is 0.0 (seqeval divides by zero there).

    Args:
        true_tags: a sequence of sentences, each a sequence of non-empty
            `str` (or UTF-8 `bytes`) tags: lists, tuples or NumPy arrays.
        pred_tags: the predicted tags, as many sentences as `true_tags` and
            as many tags in each sentence.

    Returns:
        A float in [0, 1].

    Raises:
        ValueError: as `entity_report`, for sentences or tags that do not align.

    Example:

    >>> token_accuracy([["DET", "NOUN", "VERB"], ["PRON"]], [["DET", "VERB", "VERB"], ["PRON"]])
    0.75
    """
    true_tags, pred_tags = _checked_pair(true_tags, pred_tags)
    tokens = correct = 0
    for true, predicted in zip(true_tags, pred_tags, strict=True):
        tokens += len(true)
        correct += sum(t == p for t, p in zip(true, predicted, strict=True))
    return correct / tokens if tokens else 0.0


def _ratio(numerator, denominator):
    return numerator / denominator if denominator else 0.0


def _scores(found, predicted, true):
    precision = _ratio(found, predicted)
    recall = _ratio(found, true)
    f1 = _ratio(2 * precision * recall, precision + recall)
    return {"precision": precision, "recall": recall, "f1": f1, "support": true}


def _mean(rows, weights, support):
    """The weighted mean of the rows' scores; 0.0 when the weights sum to 0."""
    total = sum(weights)
    mean = {
        score: _ratio(sum(row[score] * w for row, w in zip(rows, weights, strict=True)), total)
        for score in ("precision", "recall", "f1")
    }
    return {**mean, "support": support}


def _as_list(name, value):
    try:
        return list(value)
    except TypeError:
        raise TypeError(f"`{name}` must be a sequence, got {type(value).__name__}.") from None


def _checked_sentence(name, tags):
    """One sentence as a list of non-empty str; `name` is how the caller's argument reads."""
    if isinstance(tags, (str, bytes)):
        raise TypeError(
            f"`{name}` must be a sequence of tags, not a single {type(tags).__name__} (one "
            f"sentence? wrap it in a list)."
        )
    checked = []
    for j, tag in enumerate(_as_list(name, tags)):
        if isinstance(tag, bytes):
            tag = tag.decode("utf-8", errors="replace")
        elif not isinstance(tag, str):
            raise TypeError(f"`{name}[{j}]` must be a str tag, got {tag!r:.80}.")
        if not tag:
            raise ValueError(f"`{name}[{j}]` is an empty tag; outside an entity, the tag is \"O\".")
        checked.append(str(tag))  # NumPy's str_ as str
    return checked


def _checked_sentences(name, sentences):
    if isinstance(sentences, (str, bytes)):
        raise TypeError(
            f"`{name}` must be a sequence of sentences, not a single {type(sentences).__name__}."
        )
    return [_checked_sentence(f"{name}[{i}]", s) for i, s in enumerate(_as_list(name, sentences))]


def _checked_pair(true_tags, pred_tags):
    true_tags = _checked_sentences("true_tags", true_tags)
    pred_tags = _checked_sentences("pred_tags", pred_tags)
    if len(true_tags) != len(pred_tags):
        raise ValueError(
            f"`true_tags` and `pred_tags` must have the same number of sentences, got "
            f"{len(true_tags)} and {len(pred_tags)}."
        )
    for i, (true, predicted) in enumerate(zip(true_tags, pred_tags, strict=True)):
        if len(true) != len(predicted):
            raise ValueError(
                f"`pred_tags[{i}]` has {len(predicted)} tags but `true_tags[{i}]` has {len(true)}: "
                f"sentence {i} must have one predicted tag per true tag."
            )
    return true_tags, pred_tags
