"""WordPiece vocabularies: learn one from text, save and load `vocab.txt`."""

import collections
import numbers
import os

import keras
import tensorflow as tf
from tensorflow_text.python.ops import bert_tokenizer

from tfnlp.data import _wordpiece_learner

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@tf.autograph.experimental.do_not_convert
def _flat_strings(x):
    return tf.reshape(x.flat_values if isinstance(x, tf.RaggedTensor) else x, [-1])


def _text_batches(texts, batch_size):
    """Batches of scalar strings from a dataset of strings, documents or batches."""
    if isinstance(texts, tf.data.Dataset):
        spec = texts.element_spec
        if not isinstance(spec, (tf.TensorSpec, tf.RaggedTensorSpec)) or spec.dtype != tf.string:
            raise ValueError(
                "`texts` must be a dataset of tf.string tensors (texts or documents), "
                f"got element_spec {spec}."
            )
        return texts.map(_flat_strings).unbatch().batch(batch_size)
    texts = list(texts)
    if not all(isinstance(t, (str, bytes)) for t in texts):
        raise ValueError("`texts` must be a tf.data.Dataset or an iterable of strings.")
    return tf.data.Dataset.from_tensor_slices(tf.constant(texts, tf.string)).batch(batch_size)


def count_words(texts, lower_case=True, batch_size=1024, progress=True):
    """Counts BERT "words" (CJK characters count as one word each).

    Args:
        texts: a `tf.data.Dataset` of scalar strings or of 1-D string tensors
            (documents), or an iterable of Python strings.
        lower_case: bool, lower-case and strip accents first (uncased BERT).
        batch_size: int, texts tokenized at once.
        progress: bool, show a progress bar (texts and words counted).

    Returns:
        A `collections.Counter` of words (`str`).
    """
    splitter = bert_tokenizer.BasicTokenizer(lower_case=lower_case)
    words = _text_batches(texts, batch_size).map(
        tf.autograph.experimental.do_not_convert(lambda batch: splitter.tokenize(batch).flat_values),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    counts = collections.Counter()
    bar = keras.utils.Progbar(None, unit_name="batch") if progress else None
    num_words = 0
    for step, batch in enumerate(words.as_numpy_iterator(), 1):
        counts.update(batch)
        num_words += len(batch)
        if bar is not None:
            bar.update(step, values=[("words", num_words)], finalize=False)
    if bar is not None:
        bar.update(step if counts else 0, values=[("words", num_words)], finalize=True)
    return collections.Counter({w.decode("utf-8"): c for w, c in counts.items()})


def _learner_options(vocabulary_size, max_unique_characters=None):
    """The learner's settings that `learn_wordpiece_vocabulary` chooses (see its Args)."""
    return {"max_unique_chars": max_unique_characters or max(300, vocabulary_size // 4), "lower_thresh": 1}


def learn_wordpiece_vocabulary(
    texts,
    vocabulary_size,
    lower_case=True,
    reserved_tokens=SPECIAL_TOKENS,
    max_unique_characters=None,
    output_path=None,
    progress=True,
):
    """Learns a WordPiece vocabulary: tensorflow-text's learner, faster (benchmarks/README.md).

    Text is split into words as BERT does (whitespace, punctuation, and every
    CJK character on its own, as in BERT-Chinese), then the learner picks the
    word pieces. The pieces are exactly those of tensorflow-text's learner
    (`bert_vocab_from_dataset`'s algorithm), computed without counting every
    substring of every word at every threshold it tries
    (`tfnlp/data/_wordpiece_learner.py`). The reserved tokens come first, so
    with the defaults `[PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4`.

    Args:
        texts: a `tf.data.Dataset` of scalar strings or of 1-D string tensors
            (documents), or an iterable of Python strings.
        vocabulary_size: int, the target size (the result may be a little
            smaller; it is never larger: when the learner overshoots, its
            rarest multi-character pieces are dropped, never the characters
            and `##` suffix characters that spell every word; a size too
            small even for those is a `ValueError`).
        lower_case: bool, lower-case and strip accents (use the same value for
            the tokenizer).
        reserved_tokens: tokens placed first, in order.
        max_unique_characters: int, the alphabet size kept; rarer characters
            become `[UNK]`. Defaults to `max(300, vocabulary_size // 4)`: room
            for the common characters of Chinese text (each CJK character is a
            token of its own) while leaving most of the vocabulary to words.
        output_path: optional path of a `vocab.txt` to write.
        progress: bool, show a progress bar while counting words.

    Returns:
        The vocabulary, a list of strings.

    Example:

    >>> texts = ["the cat sat on the mat", "the dog sat", "春眠不觉晓"] * 20
    >>> vocabulary = learn_wordpiece_vocabulary(texts, 60, progress=False)
    >>> vocabulary[:5], "the" in vocabulary, "春" in vocabulary
    (['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'], True, True)
    """
    if isinstance(vocabulary_size, bool) or not isinstance(vocabulary_size, numbers.Integral):
        raise ValueError(f"`vocabulary_size` must be an int, got {vocabulary_size!r}.")
    vocabulary_size = int(vocabulary_size)
    if vocabulary_size <= len(reserved_tokens):
        raise ValueError(
            f"`vocabulary_size` ({vocabulary_size}) must exceed the number of "
            f"`reserved_tokens` ({len(reserved_tokens)})."
        )
    counts = count_words(texts, lower_case=lower_case, progress=progress)
    if not counts:
        raise ValueError("`texts` contains no words: cannot learn a vocabulary.")
    vocabulary = _wordpiece_learner.learn(
        counts.items(),
        vocabulary_size,
        list(reserved_tokens),
        **_learner_options(vocabulary_size, max_unique_characters),
    )
    vocabulary = _cut_to_size(vocabulary, vocabulary_size, reserved_tokens, counts)
    if output_path is not None:
        save_vocabulary(vocabulary, output_path)
    return vocabulary


def _cut_to_size(vocabulary, size, reserved_tokens, counts, joiner="##"):
    """Drops the rarest multi-character pieces of a learned vocabulary longer than `size`.

    The learner can overshoot the size. Its list ranks pieces by count, and
    puts last the one-character suffixes (`##u`) that no threshold kept but
    that let every word be spelled; cutting the list's tail would turn every
    word needing one of them into `[UNK]`. So what stays: the reserved
    tokens, every character, and every character's suffix form that some
    word needs (characters inside words), then the most frequent other pieces.
    """
    if len(vocabulary) <= size:
        return vocabulary
    reserved = set(reserved_tokens)
    characters = {t for t in vocabulary if len(t) == 1 and t not in reserved}
    inner = {c for word in counts for c in word[1:]} & characters
    needed = reserved | characters | {joiner + c for c in inner}
    room = size - len(needed)
    if room < 0:
        raise ValueError(
            f"`vocabulary_size` ({size}) is too small for the texts' alphabet: "
            f"{len(characters)} characters, {len(inner)} of them inside words, and "
            f"{len(reserved)} reserved tokens need {len(needed)} tokens to spell every "
            "word. Raise `vocabulary_size` or lower `max_unique_characters`."
        )
    pieces = [t for t in vocabulary if t not in needed][:room]  # most frequent first
    kept = needed.union(pieces)
    return [t for t in vocabulary if t in kept]


def save_vocabulary(vocabulary, path):
    """Writes `vocabulary` as `vocab.txt`: one token per line, in id order.

    Args:
        vocabulary: list of tokens.
        path: the file to write (written to a temporary name, then renamed).
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("".join(f"{token}\n" for token in vocabulary))
    os.replace(tmp, path)  # never leaves a half-written vocabulary behind


def load_vocabulary(path):
    """Reads a `vocab.txt` (ours or a released BERT one) into a list.

    Args:
        path: the file, one token per line in id order.

    Returns:
        The tokens, a list of strings.

    Raises:
        ValueError: the file is empty, not UTF-8, or has empty or duplicated
            tokens; the message names the file and the lines.
    """
    try:
        with open(path, encoding="utf-8") as f:
            tokens = f.read().split("\n")
    except UnicodeDecodeError as error:
        raise ValueError(f"Vocabulary file {path} is not UTF-8 text: {error}.") from error
    if tokens and tokens[-1] == "":
        tokens.pop()
    tokens = [t.rstrip("\r") for t in tokens]
    if not tokens:
        raise ValueError(f"Vocabulary file {path} is empty.")
    empty = [i + 1 for i, t in enumerate(tokens) if not t.strip()]
    if empty:
        raise ValueError(f"Vocabulary file {path} has empty tokens on lines {empty[:10]}.")
    seen, duplicates = set(), []
    for i, t in enumerate(tokens):
        if t in seen:
            duplicates.append(f"{t!r} (line {i + 1})")
        seen.add(t)
    if duplicates:
        raise ValueError(f"Vocabulary file {path} repeats tokens: {', '.join(duplicates[:10])}.")
    return tokens
