"""ELMo inputs: words, character ids and next/previous-word targets, in-graph."""

import collections

import tensorflow as tf
import tensorflow_text as tf_text

from tfnlp import _checks
from tfnlp.data._tensors import cut_at_character, dense_row, unbatched
from tfnlp.data.tuning import _prefetched

BOS, EOS, UNK = "<S>", "</S>", "<UNK>"
# Character ids as in bilm-tf: UTF-8 bytes 0-255 and five markers, all + 1 so
# that 0 is padding.
BOS_CHAR, EOS_CHAR, BOW_CHAR, EOW_CHAR, PAD_CHAR = 256, 257, 258, 259, 260
CHARACTER_VOCABULARY_SIZE = 262  # 261 ids + the padding id 0

# Split on whitespace as Python's `str.split()` knows it (RE2's `\s` is only
# ASCII's [\t\n\f\r ]): also \v, the separators \x1c-\x1f, NEL and every
# Unicode space, line and paragraph separator (\p{Z}: no-break, ideographic,
# em spaces...). Punctuation and symbols are words of their own.
_WORD_PATTERN = r"[\s\v\x{1c}-\x{1f}\x{85}\p{Z}]+|[\p{P}\p{S}]"
_KEEP_PATTERN = r"[\p{P}\p{S}]"


def split_words(texts):
    """Splits text into words: on whitespace, with punctuation as separate words.

    Whitespace is what Python's `str.split()` splits on: Unicode spaces
    (no-break, ideographic, ...) and line separators included.

    Case is kept (ELMo is cased). Invalid UTF-8 is replaced by U+FFFD first,
    which, being a symbol, becomes a word of its own.

    Args:
        texts: `tf.string` tensor `(B,)`.

    Returns:
        `tf.RaggedTensor` of words `(B, None)`.

    Example:

    >>> split_words(tf.constant(["Hello, world!"])).to_list()
    [[b'Hello', b',', b'world', b'!']]
    """
    _checks.tensors(("texts", texts, "B", "string"))
    texts = tf_text.coerce_to_structurally_valid_utf8(texts, replacement_char="\ufffd")
    return tf_text.regex_split(texts, _WORD_PATTERN, _KEEP_PATTERN)


def sentence_tokens(texts, max_tokens, max_input_bytes=100_000):
    """Texts -> ELMo's token sequences `<S> w_1 .. w_n </S>`, at most `max_tokens` each.

    Each text is first cut to its first `max_input_bytes` bytes (never
    inside a character), so the work is bounded whatever the text's
    length; words then come from `split_words`, and a longer text keeps its
    first `max_tokens - 2` words. Training (`elmo_dataset`) and serving
    (`tfnlp.export.export_elmo`) both build sentences this way.

    Args:
        texts: `tf.string` tensor `(B,)`.
        max_tokens: int, tokens per text, the two markers included (>= 2).
        max_input_bytes: int, the longest text read, in bytes (default
            100,000: far more than `max_tokens` words of any real text).

    Returns:
        `tf.RaggedTensor` of `tf.string` `(B, None)`.

    Example:

    >>> sentence_tokens(tf.constant(["Hello, world!", ""]), 4).to_list()
    [[b'<S>', b'Hello', b',', b'</S>'], [b'<S>', b'</S>']]
    """
    max_tokens = _checks.positive_int("max_tokens", max_tokens)
    if max_tokens < 2:
        raise ValueError(f"`max_tokens` must be at least 2 (<S> and </S>), got {max_tokens}.")
    max_input_bytes = _checks.max_input_bytes(max_input_bytes)
    _checks.tensors(("texts", texts, "B", "string"))
    words = split_words(cut_at_character(texts, max_input_bytes))[:, : max_tokens - 2]
    count = words.nrows()
    return tf.concat([tf.fill([count, 1], BOS), words, tf.fill([count, 1], EOS)], axis=1)


def character_ids(words, max_characters=50):
    """Words to ELMo character ids `(..., max_characters)` (0 = padding).

    Each word is `[begin-of-word] bytes [end-of-word]` padded with the pad
    character, ids shifted by one; the words `<S>` and `</S>` get the
    begin/end-of-sentence characters. Words longer than `max_characters - 2`
    bytes are truncated (possibly inside a multi-byte character, as bilm-tf
    does); the empty string (padding) gives all zeros.

    Args:
        words: `tf.string` tensor of any shape (dense or ragged).
        max_characters: int, characters per word including the two markers.

    Returns:
        int32 tensor `words.shape + (max_characters,)`.

    Example:

    >>> character_ids(tf.constant(["a"]), max_characters=5).numpy()
    array([[259,  98, 260, 261, 261]], dtype=int32)
    """
    max_characters = _checks.positive_int("max_characters", max_characters)
    if max_characters < 3:
        raise ValueError(f"`max_characters` must be at least 3, got {max_characters}.")
    if isinstance(words, tf.RaggedTensor):
        return words.with_flat_values(character_ids(words.flat_values, max_characters))
    words = tf.convert_to_tensor(words)
    _checks.tensors(("words", words, None, "string"))
    flat = tf.reshape(words, [-1])
    count, body_size = tf.shape(flat)[0], max_characters - 2
    body = tf.strings.substr(flat, 0, body_size, unit="BYTE")
    chars = tf.cast(tf.io.decode_raw(body, tf.uint8, fixed_length=body_size), tf.int32)
    lengths = tf.strings.length(body)
    marker = tf.where(flat == BOS, BOS_CHAR, tf.where(flat == EOS, EOS_CHAR, -1))
    is_marker = marker >= 0
    chars = tf.where(
        is_marker[:, None], tf.pad(marker[:, None], [[0, 0], [0, body_size - 1]]), chars
    )
    lengths = tf.where(is_marker, 1, lengths)
    slots = tf.range(body_size + 1)[None, :]  # everything after begin-of-word
    chars = tf.pad(chars, [[0, 0], [0, 1]])
    after_bow = tf.where(
        slots < lengths[:, None], chars, tf.where(slots == lengths[:, None], EOW_CHAR, PAD_CHAR)
    )
    ids = tf.concat([tf.fill([count, 1], BOW_CHAR), after_bow], axis=1) + 1
    ids = tf.where((flat == "")[:, None], 0, ids)
    return tf.reshape(ids, tf.concat([tf.shape(words), [max_characters]], 0))


def sentence_character_ids(texts, max_tokens, max_characters, max_input_bytes=100_000, length=None):
    """Texts -> `(words, character_ids)`: ELMo's inputs, as training built its sentences.

    Each text becomes `<S> w_1 .. w_n </S>` (`tfnlp.data.sentence_tokens`:
    cut to `max_input_bytes` bytes, then to `max_tokens` tokens), padded
    with `""` (character ids all 0) to `length` tokens. `ELMoEmbedder.predict`
    and the ELMo SavedModel (`tfnlp.export.export_elmo`) both read texts
    this way.

    Args:
        texts: `tf.string` `(B,)`.
        max_tokens: int, tokens per text, the two markers included.
        max_characters: int, the biLM's `max_characters` (`C`).
        max_input_bytes: int, the longest text read, in bytes.
        length: int (at least `max_tokens`), or None for the most tokens of a
            text in the batch (at least 2).

    Returns:
        `(words, character_ids)`: `tf.string` `(B, T)` and int32 `(B, T, C)`.
    """
    tokens = sentence_tokens(texts, max_tokens, max_input_bytes)
    if length is None:
        # Every text has its two markers; an empty batch gets them too (T >= 2).
        longest = tf.maximum(tf.reduce_max(tokens.row_lengths()), 2)
        words = tokens.to_tensor("", shape=tf.stack([tokens.nrows(), longest]))
    else:
        words = tokens.to_tensor("", shape=[None, length])
    return words, character_ids(words, max_characters)


def build_word_vocabulary(texts, max_size, min_count=1):
    """The most frequent words, after `<S>`, `</S>`, `<UNK>` (ids 0, 1, 2).

    Args:
        texts: iterable of Python strings (e.g. the sentences of a corpus).
        max_size: int, the vocabulary size including the three specials.
        min_count: int, words seen fewer times are left out.

    Returns:
        A list of words.

    Example:

    >>> build_word_vocabulary(["a b a", "a c"], max_size=5)
    ['<S>', '</S>', '<UNK>', 'a', 'b']
    """
    max_size = _checks.positive_int("max_size", max_size)
    if max_size <= 3:
        raise ValueError(f"`max_size` must exceed 3 (the special words), got {max_size}.")
    texts = list(texts)
    counts = collections.Counter()
    for start in range(0, len(texts), 4096):
        words = split_words(tf.constant(texts[start:start + 4096], tf.string)).flat_values
        counts.update(words.numpy())
    ranked = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    specials = [BOS, EOS, UNK]
    words = [w.decode("utf-8") for w in ranked]
    return specials + [w for w in words if w not in specials][: max_size - 3]


def elmo_dataset(
    texts,
    word_vocabulary,
    sequence_length=64,
    max_characters=50,
    batch_size=32,
    shuffle_buffer=0,
    seed=0,
    drop_remainder=True,
    max_input_bytes=100_000,
):
    """Sentences -> ELMo biLM batches: character ids and both LM targets.

    Each sentence becomes `<S> w_1 .. w_n </S>` (at most `sequence_length`
    tokens; longer sentences keep their first words). The forward LM at
    position t predicts token t + 1, the backward LM token t - 1.

    Args:
        texts: `tf.data.Dataset` of sentences (scalar `tf.string`) or of
            documents (1-D `tf.string`, one sentence per entry).
        word_vocabulary: list of words from `build_word_vocabulary` (`<S>`,
            `</S>`, `<UNK>` first).
        sequence_length: int, tokens per example, markers included (`T`).
        max_characters: int, characters per word (`C`, 50 in ELMo).
        batch_size: int.
        shuffle_buffer: int, sentences shuffled at once (0: keep order).
        seed: int.
        drop_remainder: bool.
        max_input_bytes: int, each sentence is cut to this many bytes
            before it is split into words (`sentence_tokens`); export with
            the same value to serve sentences exactly as they were trained.

    Returns:
        `tf.data.Dataset` of dicts of int32: `character_ids` `(B, T, C)`;
        `padding_mask`, `word_ids`, `next_word_ids`, `next_word_weights`,
        `previous_word_ids`, `previous_word_weights` `(B, T)`. Sentences
        whose number is known (`cardinality()`) give batches whose number
        is known, so Keras' `fit` knows its steps per epoch from the start.
    """
    sequence_length = _checks.positive_int("sequence_length", sequence_length)
    if sequence_length < 2:
        raise ValueError(f"`sequence_length` must be at least 2, got {sequence_length}.")
    batch_size = _checks.positive_int("batch_size", batch_size)
    max_input_bytes = _checks.max_input_bytes(max_input_bytes)
    if list(word_vocabulary[:3]) != [BOS, EOS, UNK]:
        raise ValueError(f"`word_vocabulary` must start with {[BOS, EOS, UNK]}.")
    repeated = sorted(w for w, n in collections.Counter(list(word_vocabulary)).items() if n > 1)
    if repeated:
        raise ValueError(f"`word_vocabulary` lists words more than once: {repeated[:5]}.")
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(word_vocabulary), tf.range(len(word_vocabulary), dtype=tf.int32)
        ),
        default_value=2,  # <UNK>
    )
    spec = texts.element_spec
    if spec.shape.rank:  # documents: one sentence per entry
        texts = texts.map(dense_row).unbatch()
    if shuffle_buffer:
        texts = texts.shuffle(shuffle_buffer, seed=seed)

    @tf.autograph.experimental.do_not_convert
    def encode(sentences):
        tokens = sentence_tokens(sentences, sequence_length, max_input_bytes)
        count = tokens.nrows()
        ids = table.lookup(tokens)
        padded_tokens = tokens.to_tensor("", shape=[count, sequence_length])
        word_ids, mask = tf_text.pad_model_inputs(ids, sequence_length)
        length = tokens.row_lengths()[:, None]
        position = tf.range(sequence_length, dtype=length.dtype)[None, :]
        has_next = tf.cast(position < length - 1, tf.int32)
        has_previous = tf.cast((position >= 1) & (position < length), tf.int32)
        next_ids = tf.concat([word_ids[:, 1:], tf.zeros([count, 1], tf.int32)], 1) * has_next
        previous_ids = tf.concat([tf.zeros([count, 1], tf.int32), word_ids[:, :-1]], 1) * has_previous
        return {
            "character_ids": character_ids(padded_tokens, max_characters),
            "padding_mask": tf.cast(mask, tf.int32),
            "word_ids": tf.cast(word_ids, tf.int32),
            "next_word_ids": next_ids,
            "next_word_weights": has_next,
            "previous_word_ids": previous_ids,
            "previous_word_weights": has_previous,
        }

    dataset = unbatched(texts.batch(256).map(encode, num_parallel_calls=tf.data.AUTOTUNE), texts)
    return _prefetched(dataset.batch(batch_size, drop_remainder=drop_remainder))
