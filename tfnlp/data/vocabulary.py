"""WordPiece vocabularies: learn one from text, save and load `vocab.txt`."""

import collections
import os
import warnings

import keras
import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.python.ops import bert_tokenizer

from tfnlp import _checks
from tfnlp.data import _bert_text, _wordpiece_learner
from tfnlp.data import _unicode_tables as unicode_tables

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


def count_words(texts, lower_case=True, batch_size=1024, progress=True, normalization="bert"):
    """Counts BERT "words", split as `WordPieceTokenizer` splits them (CJK characters count
    as one word each).

    Args:
        texts: a `tf.data.Dataset` of scalar strings or of 1-D string tensors
            (documents), or an iterable of Python strings.
        lower_case: bool, lower-case and strip accents first (uncased BERT).
        batch_size: int, texts tokenized at once.
        progress: bool, show a progress bar (texts and words counted).
        normalization: `"bert"` or `"nfkc"`, as `WordPieceTokenizer`'s.

    Returns:
        A `collections.Counter` of words (`str`).
    """
    if normalization == "nfkc":
        splitter = bert_tokenizer.BasicTokenizer(lower_case=lower_case)

        def split(batch):
            return splitter.tokenize(batch).flat_values
    elif normalization == "bert":
        def split(batch):
            batch = tf_text.coerce_to_structurally_valid_utf8(batch, replacement_char="\ufffd")
            return _bert_text.bert_words(batch, lower_case).flat_values
    else:
        raise ValueError(f"`normalization` must be 'bert' or 'nfkc', got {normalization!r}.")
    words = _text_batches(texts, batch_size).map(
        tf.autograph.experimental.do_not_convert(split), num_parallel_calls=tf.data.AUTOTUNE
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
    return {"max_unique_chars": max_unique_characters or character_budget(vocabulary_size),
            "lower_thresh": 1, "split_alone": unicode_tables.splits_alone}


def character_budget(vocabulary_size):
    """The most characters `learn_wordpiece_vocabulary` keeps by default: half the vocabulary.

    Chinese or Japanese text needs a token per character (thousands); at
    a quarter, 8,000 tokens on 20k Chinese news sentences kept 1,947 of the
    3,964 characters seen and left 2.33% of held-out tokens `[UNK]`.
    """
    return max(300, vocabulary_size // 2)


def _warn_about_dropped_characters(counts, budget, max_token_length=50):
    """Says how many characters the learner leaves out (they become `[UNK]`), and how to keep them."""
    characters = collections.Counter()
    for word, count in counts.items():
        if len(word) <= max_token_length:
            for char in word:
                characters[char] += count
    if len(characters) <= budget:
        return
    dropped = [count for _, count in characters.most_common()[budget:]]
    share = sum(dropped) / sum(characters.values())
    warnings.warn(
        f"learn_wordpiece_vocabulary: the texts have {len(characters):,} distinct characters, "
        f"more than `max_unique_characters` ({budget:,}): the {len(dropped):,} rarest "
        f"({share:.3%} of all characters, each seen at most {max(dropped):,} times) are left out, "
        "and words with them become [UNK]. To keep them, raise `max_unique_characters` "
        "(and `vocabulary_size`).",
        UserWarning,
        stacklevel=3,
    )


def unknown_rate(tokenizer, texts, batch_size=256):
    """How much of `texts` a tokenizer turns into `[UNK]`.

    Args:
        tokenizer: a `WordPieceTokenizer`.
        texts: an iterable of strings (held-out text, never the text the
            vocabulary was learned on, to judge it fairly).
        batch_size: int, texts tokenized at once.

    Returns:
        A dict: `tokens` (the number of tokens), `unknown_tokens` (the share
        of tokens that are `[UNK]`), `texts_with_unknown` (the share of the
        non-empty texts with at least one `[UNK]`).

    Example:

    >>> from tfnlp.data import WordPieceTokenizer
    >>> tokenizer = WordPieceTokenizer(list(SPECIAL_TOKENS) + ["a", "b"])
    >>> unknown_rate(tokenizer, ["a b", "a c"])
    {'tokens': 4, 'unknown_tokens': 0.25, 'texts_with_unknown': 0.5}
    """
    tokens = unknown = with_unknown = non_empty = 0
    texts = list(texts)
    for start in range(0, len(texts), batch_size):
        for ids in tokenizer(tf.constant(texts[start:start + batch_size])).to_list():
            found = sum(1 for i in ids if i == tokenizer.unk_id)
            tokens += len(ids)
            unknown += found
            non_empty += bool(ids)
            with_unknown += bool(found)
    return {"tokens": tokens, "unknown_tokens": unknown / max(tokens, 1),
            "texts_with_unknown": with_unknown / max(non_empty, 1)}


def learn_wordpiece_vocabulary(
    texts,
    vocabulary_size,
    lower_case=True,
    reserved_tokens=SPECIAL_TOKENS,
    max_unique_characters=None,
    output_path=None,
    progress=True,
    normalization="bert",
):
    """Learns a WordPiece vocabulary: tensorflow-text's learner, faster (benchmarks/README.md).

    Text is split into words as BERT does (whitespace, punctuation, and every
    CJK character on its own, as in BERT-Chinese), then the learner picks the
    word pieces. The pieces are exactly those of tensorflow-text's learner
    (`bert_vocab_from_dataset`'s algorithm), computed without counting every
    substring of every word at every threshold it tries
    (`tfnlp/data/_wordpiece_learner.py`), with one difference: no
    vocabulary is spent on suffix pieces the tokenizer can never emit
    (`##北` when every CJK character is a word of its own, `##,` when
    punctuation always is). The reserved tokens come first, so with the
    defaults `[PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4`. With
    `progress`, the size reached is printed; a warning says when characters
    had to be left out. `unknown_rate` measures the vocabulary on held-out
    text.

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
            become `[UNK]` (with a warning that says how many). By default
            `character_budget(vocabulary_size)`, half the vocabulary (room
            for the characters of Chinese text, each CJK character a token of
            its own, while leaving the rest to words), raised by what the
            vocabulary still lacks when the texts have too few words to fill
            it (up to twice).
        output_path: optional path of a `vocab.txt` to write.
        progress: bool, show a progress bar while counting words, then the
            size reached.
        normalization: `"bert"` or `"nfkc"`: the `WordPieceTokenizer`
            normalisation the vocabulary is for.

    Returns:
        The vocabulary, a list of strings.

    Example:

    >>> texts = ["the cat sat on the mat", "the dog sat", "春眠不觉晓"] * 20
    >>> vocabulary = learn_wordpiece_vocabulary(texts, 60, progress=False)
    >>> vocabulary[:5], "the" in vocabulary, "春" in vocabulary
    (['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'], True, True)
    """
    vocabulary_size = _checks.integer("vocabulary_size", vocabulary_size)
    if vocabulary_size <= len(reserved_tokens):
        raise ValueError(
            f"`vocabulary_size` ({vocabulary_size}) must exceed the number of "
            f"`reserved_tokens` ({len(reserved_tokens)})."
        )
    counts = count_words(texts, lower_case=lower_case, progress=progress, normalization=normalization)
    if not counts:
        raise ValueError("`texts` contains no words: cannot learn a vocabulary.")
    options = _learner_options(vocabulary_size, max_unique_characters)
    distinct = len({char for word in counts for char in word})
    for _ in range(3):
        vocabulary = _wordpiece_learner.learn(counts.items(), vocabulary_size, list(reserved_tokens), **options)
        vocabulary = _cut_to_size(vocabulary, vocabulary_size, reserved_tokens, counts)
        shortfall = vocabulary_size - len(vocabulary)
        # Text made of characters more than of words (classical Chinese: every
        # character a word) leaves the default budget's vocabulary short: give
        # what is left to the next most frequent characters.
        if max_unique_characters or shortfall <= 0.05 * vocabulary_size or options["max_unique_chars"] >= distinct:
            break
        options["max_unique_chars"] += shortfall
    _warn_about_dropped_characters(counts, options["max_unique_chars"])
    if progress:
        characters = sum(1 for t in vocabulary if len(t) == 1 and t not in reserved_tokens)
        print(f"Learned {len(vocabulary):,} tokens (asked for {vocabulary_size:,}), "
              f"{characters:,} of them single characters.")
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
