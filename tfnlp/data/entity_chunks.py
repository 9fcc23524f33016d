"""Entity spans of predicted tag ids in the TensorFlow graph, as `tfnlp.metrics.entity_spans`.

A tagger's SavedModel returns the entities of its predicted tags; the graph
function here finds them by the rules `entity_spans` (seqeval's default,
conlleval mode) reads tags by, so an exported model and the metrics agree.
"""

import tensorflow as tf

# A tag's prefix as an int in the graph; -1 (no word) reads as "O".
_O, _B, _I, _E, _S = range(5)
_PREFIX_CODES = {"B": _B, "I": _I, "E": _E, "S": _S}


def is_entity_tag_set(tag_names):
    """Whether `tag_names` are entity tags: "O" and "<P>-<TYPE>" with P in B, I, E, S.

    Such names cover IOB2, IOB1 and IOBES (BILOU written with E and S) and
    any mixture; `entity_chunks` reads them. TYPE is any non-empty string
    (everything after the first "-": "B-ORG-X" is of type "ORG-X"). Names
    that a tagger of another kind uses ("NOUN", "PER", "X-PER", "B-") make
    the answer False, and so does an empty list.

    Args:
        tag_names: a sequence of `str` (or UTF-8 `bytes`), the name of each
            tag id.

    Returns:
        bool.

    Raises:
        TypeError: if `tag_names` is a single str or bytes, or not a sequence.

    Example:

    >>> is_entity_tag_set(["O", "B-PER", "I-PER", "E-PER", "S-PER"])
    True
    >>> is_entity_tag_set(["NOUN", "VERB", "DET"])
    False
    """
    names = _names(tag_names)
    return bool(names) and all(_tag_error(name) is None for name in names)


def entity_type_names(tag_names):
    """The distinct entity types of `tag_names`, sorted: what `entity_chunks`' type ids index.

    Args:
        tag_names: a sequence of `str` (or UTF-8 `bytes`) for which
            `is_entity_tag_set` is True.

    Returns:
        A sorted list of str (empty when every name is "O").

    Raises:
        ValueError: naming `tag_names` (and the first bad name) when
            `is_entity_tag_set(tag_names)` is False.

    Example:

    >>> entity_type_names(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])
    ['LOC', 'PER']
    """
    return sorted({name[2:] for name in _checked_names(tag_names) if name != "O"})


@tf.autograph.experimental.do_not_convert
def entity_chunks(tag_ids, tag_names):
    """The entities of each row of predicted tag ids, in the graph, as `entity_spans` finds them.

    Row `b` gives exactly `tfnlp.metrics.entity_spans([tag_names[i] for i
    in tag_ids[b] if i >= 0])` (seqeval's default, conlleval mode), the
    malformed sequences a model can predict included: an I- without a B-
    starts an entity, a type switch inside one (B-PER I-ORG) ends it and
    starts another, E- and S- (IOBES) close entities, in any mixture.

    How: from each word's prefix and type and the previous word's (an "O"
    before the first word, another after the last), two booleans say
    whether an entity ends before the word and whether one starts at it,
    by `entity_spans`' rules. With B, I, E, S and O prefixes an entity is
    open after a word exactly when the word is not "O", so entities never
    overlap: the k-th start of a row pairs with its k-th end. Both are read
    off with `tf.where` (row-major, so in order) and padded into `(B, E)`.
    Pure graph ops, for unknown B and W too (`tf.function`, SavedModel); not
    XLA-compilable, as E depends on the values.

    Args:
        tag_ids: int32 tensor `(B, W)`, tag ids into `tag_names`; -1 marks
            no word. A row's words come first, -1 only after them (a -1
            between words reads as "O").
        tag_names: a sequence of `str` (or UTF-8 `bytes`), the name of each
            tag id, for which `is_entity_tag_set` is True; read in Python,
            when the graph is built.

    Returns:
        A dict of int32 tensors, E being the most entities of any row
        (0 when no row has one), entities of a row in order of start:
        `"types"` `(B, E)`, type ids into `entity_type_names(tag_names)`;
        `"starts"` `(B, E)`, the index of each entity's first word;
        `"ends"` `(B, E)`, the index after its last word (exclusive); all
        three -1 after a row's entities; `"counts"` `(B,)`, the number of
        entities in each row.

    Raises:
        ValueError: naming `tag_names` when `is_entity_tag_set` is False
            for it; naming `tag_ids` for a rank other than 2, or for an id
            outside `[-1, len(tag_names))` (inside `tf.function` or a
            SavedModel, an `InvalidArgumentError` at run time).
        TypeError: naming `tag_ids` when its dtype is not int32.

    Example:

    >>> names = ["O", "B-LOC", "B-PER", "I-PER"]
    >>> entity_type_names(names)
    ['LOC', 'PER']
    >>> tag_ids = tf.constant([[2, 3, 0, 1],     # B-PER I-PER O B-LOC
    ...                        [3, 3, -1, -1]])  # I-PER I-PER (malformed IOB2)
    >>> chunks = entity_chunks(tag_ids, names)
    >>> {key: value.numpy().tolist() for key, value in chunks.items()}
    {'types': [[1, 0], [1, -1]], 'starts': [[0, 3], [0, -1]], 'ends': [[2, 4], [2, -1]],
     'counts': [2, 1]}
    """
    names = _checked_names(tag_names)
    types = entity_type_names(names)
    # One entry per tag id, then the "O" that -1 reads as.
    prefix_table = [_O if n == "O" else _PREFIX_CODES[n[0]] for n in names] + [_O]
    type_table = [-1 if n == "O" else types.index(n[2:]) for n in names] + [-1]
    tag_ids = _checked_tag_ids(tag_ids, len(names))

    ids = tf.where(tag_ids < 0, len(names), tag_ids)  # (B, W)
    prefix = tf.gather(tf.constant(prefix_table, tf.int32), ids)  # (B, W)
    type_ = tf.gather(tf.constant(type_table, tf.int32), ids)  # (B, W)
    outside = tf.fill([tf.shape(ids)[0], 1], _O)  # (B, 1)
    no_type = tf.fill([tf.shape(ids)[0], 1], -1)  # (B, 1)
    # Position i in [0, W]: the word before it (an "O" before the first) and
    # the word at it (an "O" after the last, which ends an entity still open).
    before = tf.concat([outside, prefix], axis=1)  # (B, W + 1)
    before_type = tf.concat([no_type, type_], axis=1)  # (B, W + 1)
    at = tf.concat([prefix, outside], axis=1)  # (B, W + 1)
    at_type = tf.concat([type_, no_type], axis=1)  # (B, W + 1)

    def one_of(codes, *prefixes):
        return tf.reduce_any(tf.stack([codes == p for p in prefixes]), axis=0)

    new_type = before_type != at_type
    # `entity_spans`' `_ends` and `_starts`, "O" being the only outside prefix here.
    ends = (
        one_of(before, _E, _S)
        | (one_of(before, _B, _I) & one_of(at, _B, _S, _O))
        | ((before != _O) & new_type)
    )  # (B, W + 1): an entity ends before position i (its exclusive end is i)
    starts = (
        one_of(at, _B, _S)
        | (one_of(at, _I, _E) & one_of(before, _O, _E, _S))
        | ((at != _O) & new_type)
    )  # (B, W + 1): an entity starts at position i
    counts = tf.reduce_sum(tf.cast(starts, tf.int32), axis=1)  # (B,), as many ends
    start_at = tf.where(starts)  # (N, 2) [row, position], row-major: in order of start
    end_at = tf.cast(tf.where(ends)[:, 1], tf.int32)  # (N,)

    def padded(values):  # (N,) -> (B, E), -1 after each row's entities
        rows = tf.RaggedTensor.from_row_lengths(values, counts, validate=False)
        dense = rows.to_tensor(default_value=-1)
        return tf.ensure_shape(dense, [tag_ids.shape[0], None])

    return {
        "types": padded(tf.gather_nd(at_type, start_at)),
        "starts": padded(tf.cast(start_at[:, 1], tf.int32)),
        "ends": padded(end_at),
        "counts": counts,
    }


def _names(tag_names):
    """`tag_names` as a list; bytes decoded, anything else left for the checks."""
    if isinstance(tag_names, (str, bytes)):
        raise TypeError(
            f"`tag_names` must be a sequence of tag names, not a single "
            f"{type(tag_names).__name__}: {tag_names!r:.80}."
        )
    try:
        names = list(tag_names)
    except TypeError:
        raise TypeError(
            f"`tag_names` must be a sequence of tag names, got {type(tag_names).__name__}."
        ) from None
    return [n.decode("utf-8", errors="replace") if isinstance(n, bytes) else n for n in names]


def _tag_error(name):
    """Why `name` is not "O" or "<B|I|E|S>-<TYPE>", or None when it is."""
    if not isinstance(name, str):
        return f"must be a str tag name, got {name!r:.80}"
    if name == "O" or (len(name) > 2 and name[0] in _PREFIX_CODES and name[1] == "-"):
        return None
    return f"is {name!r:.80}, not 'O' or '<P>-<TYPE>' with P one of B, I, E, S"


def _checked_names(tag_names):
    names = _names(tag_names)
    if not names:
        raise ValueError("`tag_names` must name at least one tag, got an empty sequence.")
    for i, name in enumerate(names):
        error = _tag_error(name)
        if error is not None:
            raise ValueError(
                f"`tag_names[{i}]` {error}: `tag_names` must be entity tags (IOB2, IOB1 or "
                f"IOBES; see `is_entity_tag_set`)."
            )
    return [str(name) for name in names]  # NumPy's str_ as str


def _checked_tag_ids(tag_ids, num_tags):
    """`tag_ids` as an int32 `(B, W)` tensor whose ids lie in `[-1, num_tags)`."""
    tag_ids = tf.convert_to_tensor(tag_ids, dtype_hint=tf.int32)
    if tag_ids.dtype != tf.int32:
        raise TypeError(f"`tag_ids` must be an int32 tensor (B, W), got {tag_ids.dtype.name}.")
    if tag_ids.shape.rank is not None and tag_ids.shape.rank != 2:
        raise ValueError(f"`tag_ids` must be an int32 tensor (B, W), got shape {tag_ids.shape}.")
    tag_ids = tf.ensure_shape(tag_ids, [None, None])
    message = f"`tag_ids` must be in [-1, {num_tags}) (-1: no word; {num_tags} tag names)"
    # Empty ids give (max, min): no error.
    low, high = tf.reduce_min(tag_ids), tf.reduce_max(tag_ids)
    if not tf.executing_eagerly():
        checks = [
            tf.debugging.assert_greater_equal(low, -1, message=message),
            tf.debugging.assert_less(high, num_tags, message=message),
        ]
        with tf.control_dependencies(checks):
            return tf.identity(tag_ids)
    low, high = int(low), int(high)
    bad = low if low < -1 else high if high >= num_tags else None
    if bad is not None:
        raise ValueError(f"{message}, got {bad}.")
    return tag_ids
