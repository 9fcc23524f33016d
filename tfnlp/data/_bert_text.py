"""BERT's `BasicTokenizer`, in-graph: normalise text and split it into words.

This reproduces google-research/bert's `tokenization.BasicTokenizer` on any
Unicode text, as TensorFlow ops on code points (so it runs in `tf.data`, in
a `tf.function` and in an exported SavedModel):

1. drop NUL, U+FFFD and control/format characters (Cc, Cf; tab, newline
   and carriage return count as whitespace), turn whitespace into spaces;
2. uncased only: lower-case as Python's `str.lower` does (final sigma
   included), decompose (NFD, canonical order) and drop non-spacing marks
   (Mn);
3. split at spaces, and around every punctuation character (ASCII symbols
   and every P* character) and every CJK character.

No compatibility folding (NFKC) happens: full-width `１`, `Ａ` and `，` stay
what they are, as in BERT. The per-character answers come from Python's
`unicodedata` (`_unicode_tables.py`) and are baked into the graph as
constants. Speed: `benchmarks/tokenizer_benchmark.py`.

`bert_words_with_offsets` also says where each word is in the input: every
character carries, through these steps, the index of the input character
it came from.
"""

import functools

import tensorflow as tf

from tfnlp.data import _unicode_tables as unicode_tables

_SPACE = 32


class _Tables(dict):
    """The Unicode tables as constants of the graph being built, each made once
    (a cached tensor would belong to the first graph; branches capture these)."""

    def __missing__(self, name):
        self[name] = tf.constant(unicode_tables.tables()[name])
        return self[name]


def _run_value(tables, name, code_points):
    """The per-character value `name` of each code point (runs lookup)."""
    index = tf.searchsorted(tables[name + "_starts"], code_points, side="right") - 1
    return tf.gather(tables[name + "_values"], index)


def _decomposition(tables, name, flat):
    """(found, pieces (M, 4)) of the map `name` (`nfd` or `strip`), Hangul by arithmetic."""
    index, found = _sparse_lookup(tables[name + "_keys"], flat)
    pieces = tf.gather(tables[name + "_values"], index)
    syllable = flat - unicode_tables.HANGUL_FIRST
    hangul = (syllable >= 0) & (syllable < unicode_tables.HANGUL_COUNT)
    trailing = syllable % 28
    jamo = tf.stack([
        0x1100 + syllable // 588, 0x1161 + (syllable % 588) // 28,
        tf.where(trailing > 0, 0x11A7 + trailing, -1), -tf.ones_like(flat),
    ], axis=1)
    return found | hangul, tf.where(hangul[:, None], jamo, pieces)


def _sparse_lookup(keys, code_points):
    """(index into `keys`, whether the code point is there) for each code point."""
    index = tf.minimum(tf.searchsorted(keys, code_points, side="left"), tf.shape(keys)[0] - 1)
    return index, tf.equal(tf.gather(keys, index), code_points)


# Text is carried as flat code points and the text (row) each belongs to:
# cheaper to trace and run than RaggedTensors rebuilt at every step.


def _replace(flat, row_ids, pieces, source):
    """Each code point replaced by its row of `pieces` (M, K), -1 = none: (flat, row_ids, source)."""
    keep = pieces >= 0
    counts = tf.reduce_sum(tf.cast(keep, tf.int32), axis=1)
    return tf.boolean_mask(pieces, keep), tf.repeat(row_ids, counts), _carried(tf.repeat, source, counts)


def _carried(op, source, *args):
    """`op(source, *args)`, or None when no source is carried (`bert_words` carries none)."""
    return None if source is None else op(source, *args)


def _with_rows_alone(flat):
    """`flat` (M,) as rows of MAX_DECOMPOSITION: the code point, then nothing."""
    padding = -tf.ones([tf.shape(flat)[0], unicode_tables.MAX_DECOMPOSITION - 1], tf.int32)
    return tf.concat([flat[:, None], padding], 1)


def _clean(tables, flat, row_ids):
    """Step 1: control characters out, whitespace to spaces; each character's class, and
    which characters were kept."""
    kind = _run_value(tables, "class", flat)
    keep = tf.not_equal(kind, unicode_tables.DROP)
    flat = tf.where(tf.equal(kind, unicode_tables.SPACE), _SPACE, flat)
    return tf.boolean_mask(flat, keep), tf.boolean_mask(row_ids, keep), tf.boolean_mask(kind, keep), keep


def _neighbour_cased(context, row_ids, step):
    """Whether the nearest character that is not case-ignorable, before (`step` -1) or
    after (+1) each character in its own text, is cased."""
    count = tf.shape(context)[0]
    anchors = tf.cast(tf.where(tf.not_equal(context, 2))[:, 0], tf.int32)  # not ignorable
    before = tf.math.cumsum(tf.cast(tf.not_equal(context, 2), tf.int32), exclusive=step < 0)
    slot = before - 1 if step < 0 else before
    found = (slot >= 0) & (slot < tf.shape(anchors)[0])
    neighbour = tf.gather(anchors, tf.clip_by_value(slot, 0, tf.maximum(tf.shape(anchors)[0] - 1, 0)))
    neighbour = tf.where(found, neighbour, tf.zeros([count], tf.int32))
    found &= tf.equal(tf.gather(row_ids, neighbour), row_ids)  # same text
    return found & tf.equal(tf.gather(context, neighbour), 1)


def _lower(tables, flat, row_ids):
    """`str.lower` of each text: the one-to-one map, then the final-sigma rule.

    (Only U+0130 lowers to two characters, "i" + U+0307, a mark that the
    accent stripping after this drops: it maps to "i" alone.)
    """
    index, found = _sparse_lookup(tables["lower_keys"], flat)
    lowered = tf.where(found, tf.gather(tables["lower_values"], index), flat)

    def with_final_sigma():
        context = _run_value(tables, "sigma", flat)
        final = (
            tf.equal(flat, unicode_tables.CAPITAL_SIGMA)
            & _neighbour_cased(context, row_ids, -1)
            & ~_neighbour_cased(context, row_ids, +1)
        )
        return tf.where(final, unicode_tables.FINAL_SIGMA, lowered)

    has_sigma = tf.reduce_any(tf.equal(flat, unicode_tables.CAPITAL_SIGMA))
    return tf.cond(has_sigma, with_final_sigma, lambda: lowered)


def _strip_accents_in_order(tables, flat, row_ids, source):
    """NFD in canonical order, then without non-spacing marks: the general case."""
    found, pieces = _decomposition(tables, "nfd", flat)
    flat, row_ids, source = _replace(flat, row_ids, tf.where(found[:, None], pieces, _with_rows_alone(flat)), source)
    combining = _run_value(tables, "combining", flat)
    kept = tf.equal(_run_value(tables, "mark", flat), 0)
    # Canonical order sorts each run of combining characters (class > 0) by
    # class; a run starts at a character of class 0 (marks included) or a text.
    starts = tf.not_equal(row_ids, tf.concat([[-1], row_ids[:-1]], 0)) | tf.equal(combining, 0)
    run = tf.math.cumsum(tf.cast(starts, tf.int64))
    order = tf.argsort(tf.where(kept, run * 256 + tf.cast(combining, tf.int64), run * 256), stable=True)
    flat, kept, row_ids = tf.gather(flat, order), tf.gather(kept, order), tf.gather(row_ids, order)
    source = _carried(tf.gather, source, order)
    return tf.boolean_mask(flat, kept), tf.boolean_mask(row_ids, kept), _carried(tf.boolean_mask, source, kept)


def _strip_accents(tables, flat, row_ids, source=None):
    """NFD, then without non-spacing marks (Mn): (flat, row_ids, source).

    Each character maps to its decomposition less its marks (`é` -> `e`, a
    mark -> nothing, a Hangul syllable -> its jamo). Canonical reordering
    changes nothing then, unless a combining character that is not a mark
    (U+1D165, ...) is there: that rare case takes the general path.
    `source` (M,), when given, is carried along: each character that comes
    out keeps the `source` of the character it came from.
    """
    found, pieces = _decomposition(tables, "strip", flat)  # (M,), (M, 4)

    def one_to_one():  # every character gives at most one: no expansion
        values = tf.where(found, pieces[:, 0], flat)
        keep = values >= 0
        return tf.boolean_mask(values, keep), tf.boolean_mask(row_ids, keep), _carried(tf.boolean_mask, source, keep)

    def expanded():
        return _replace(flat, row_ids, tf.where(found[:, None], pieces, _with_rows_alone(flat)), source)

    def stripped():
        return tf.cond(tf.reduce_all(~found | (pieces[:, 1] < 0)), one_to_one, expanded)

    needs_order = tf.reduce_any(tf.not_equal(_run_value(tables, "reorder", flat), 0))
    return tf.cond(needs_order, lambda: _strip_accents_in_order(tables, flat, row_ids, source), stripped)


def _word_starts(flat, row_ids, alone):
    """Split at spaces and around each character where `alone` holds: (the characters that
    are not spaces, and of those the ones that start a word)."""
    previous_row = tf.concat([[-1], row_ids[:-1]], 0)
    space = tf.equal(flat, _SPACE)
    after_space = tf.not_equal(row_ids, previous_row) | tf.concat([[True], space[:-1]], 0)
    keep = ~space
    row_ids = tf.boolean_mask(row_ids, keep)
    after_space, alone = tf.boolean_mask(after_space, keep), tf.boolean_mask(alone, keep)
    first = tf.not_equal(row_ids, tf.concat([[-1], row_ids[:-1]], 0))
    return keep, first | after_space | alone | tf.concat([[False], alone[:-1]], 0)


def _words(flat, row_ids, keep, start, nrows):
    """The words that `_word_starts` found: ragged `(N, None)` strings."""
    flat, row_ids = tf.boolean_mask(flat, keep), tf.boolean_mask(row_ids, keep)
    word_ids = tf.math.cumsum(tf.cast(start, tf.int64)) - 1
    words = tf.RaggedTensor.from_value_rowids(
        flat, word_ids, nrows=tf.reduce_sum(tf.cast(start, tf.int64)), validate=False)
    strings = tf.strings.unicode_encode(words, "UTF-8")
    return tf.RaggedTensor.from_value_rowids(
        strings, tf.cast(tf.boolean_mask(row_ids, start), tf.int64), nrows=nrows, validate=False)


def bert_words(texts, lower_case):
    """BERT's words of each text of `texts` (1-D `tf.string`, valid UTF-8): ragged `(N, None)`."""
    return _traced(bool(lower_case))(texts)


def bert_words_with_offsets(texts, lower_case):
    """BERT's words of each text of `texts` (1-D `tf.string`, any bytes) and where they are.

    Returns `(words, byte_starts, byte_ends, char_starts, char_ends)`, each
    ragged `(N, None)` with the same row splits: the words (normalised
    strings, as `bert_words` gives them for the text with its invalid UTF-8
    replaced), then each word's span `[start, end)` in the text as given, in
    bytes and in code points (each invalid UTF-8 sequence counting as one,
    as in `text.decode("utf-8", "replace")`).

    Normalisation never moves a character across another, so every
    character of a word is tracked back to the input character it came from
    (`é` -> `e` comes from `é`; `İ` -> `i` from `İ`): a word spans its first
    to its last such input character, and then the characters that accent
    stripping removed right after it (`e` + U+0301: the mark is the word's);
    characters dropped as control characters (and invalid UTF-8) are in a
    span only when they are between two characters it covers.
    """
    return _traced_with_offsets(bool(lower_case))(texts)


@functools.cache
def _traced(lower_case):
    return tf.function(lambda texts: _bert_words(texts, lower_case), autograph=False,
                       input_signature=[tf.TensorSpec([None], tf.string)], reduce_retracing=True)


@functools.cache
def _traced_with_offsets(lower_case):
    return tf.function(lambda texts: _bert_words_with_offsets(texts, lower_case), autograph=False,
                       input_signature=[tf.TensorSpec([None], tf.string)], reduce_retracing=True)


def _row_ids(chars):
    # Not `chars.value_rowids()`: its tf.repeat takes memory of (texts x
    # longest text), 13 GB for 14k empty texts next to one of 100 kB.
    count = tf.shape(chars.flat_values, out_type=chars.row_splits.dtype)[0]
    return tf.searchsorted(chars.row_splits[1:], tf.range(count), side="right", out_type=tf.int32)


def _bert_words(texts, lower_case):
    tables = _Tables()
    chars = tf.strings.unicode_decode(texts, "UTF-8")
    flat, row_ids, kind, _ = _clean(tables, chars.flat_values, _row_ids(chars))
    if lower_case:
        flat, row_ids, _ = _strip_accents(tables, _lower(tables, flat, row_ids), row_ids)
        kind = _run_value(tables, "class", flat)  # CJK stays CJK; what is punctuation now
    alone = tf.equal(kind, unicode_tables.CJK) | tf.equal(kind, unicode_tables.PUNCT)
    keep, start = _word_starts(flat, row_ids, alone)
    return _words(flat, row_ids, keep, start, tf.cast(chars.nrows(), tf.int64))


def _bert_words_with_offsets(texts, lower_case):
    tables = _Tables()
    # Invalid UTF-8 -> U+FFFD (one per bad sequence, which `_clean` drops), offsets in the input.
    chars, byte_offsets = tf.strings.unicode_decode_with_offsets(texts, "UTF-8", errors="replace")
    code_points, input_rows = chars.flat_values, _row_ids(chars)  # (C,)
    flat, row_ids, kind, kept = _clean(tables, code_points, input_rows)
    origin = tf.where(kept)[:, 0]  # cleaned character -> input character
    clean_rows = row_ids
    source = tf.range(tf.shape(flat, out_type=tf.int64)[0])  # normalised character -> cleaned character
    if lower_case:
        flat, row_ids, source = _strip_accents(tables, _lower(tables, flat, row_ids), row_ids, source)
        kind = _run_value(tables, "class", flat)
    alone = tf.equal(kind, unicode_tables.CJK) | tf.equal(kind, unicode_tables.PUNCT)
    not_space, start = _word_starts(flat, row_ids, alone)
    words = _words(flat, row_ids, not_space, start, tf.cast(chars.nrows(), tf.int64))
    word_ids = tf.math.cumsum(tf.cast(start, tf.int64)) - 1
    word_count = tf.reduce_sum(tf.cast(start, tf.int64))
    word_source = tf.boolean_mask(source, not_space)
    first = tf.math.unsorted_segment_min(word_source, word_ids, word_count)  # cleaned indices
    last = tf.math.unsorted_segment_max(word_source, word_ids, word_count)
    # A word also takes the characters accent stripping removed after its last
    # one: up to the next cleaned character that gave anything (spaces
    # included) or that starts a text.
    cleaned = tf.shape(clean_rows, out_type=tf.int64)[0]
    gave = tf.scatter_nd(source[:, None], tf.ones_like(source), [cleaned]) > 0
    starts_text = tf.not_equal(clean_rows, tf.concat([[-1], clean_rows[:-1]], 0))
    stops = tf.concat([tf.where(gave | starts_text)[:, 0], [cleaned]], 0)  # sorted
    last = tf.gather(stops, tf.searchsorted(stops, last, side="right")) - 1
    first, last = tf.gather(origin, first), tf.gather(origin, last)  # input indices

    byte_offsets = byte_offsets.flat_values
    last_code_point = tf.gather(code_points, last)[:, None]  # valid: U+FFFD is never kept
    last_size = 1 + tf.reduce_sum(tf.cast(last_code_point >= [0x80, 0x800, 0x10000], tf.int64), axis=1)
    text_start = tf.gather(chars.row_splits, tf.gather(input_rows, first))
    spans = (
        tf.gather(byte_offsets, first),
        tf.gather(byte_offsets, last) + last_size,
        first - text_start,
        last + 1 - text_start,
    )
    return (words,) + tuple(words.with_flat_values(span) for span in spans)
