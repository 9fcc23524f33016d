"""tensorflow-text's WordPiece vocabulary learner, computed the fast way.

tensorflow-text's learner (`wordpiece_tokenizer_learner_lib.learn`, also what
`bert_vocab_from_dataset` runs) binary-searches a count threshold. Each probe
makes `num_iterations` passes; a pass counts every substring that starts at an
allowed start of a word (every start in the first pass; in later passes the
starts of the word's greedy split with the previous pass's tokens), then, from
the longest substring to the shortest, keeps those whose count reaches the
threshold and subtracts each substring's count from all its prefixes.

That subtraction telescopes. What is left of a substring `t` is its own count
minus the counts of its one-longer extensions, i.e. the count of the
(word, start) pairs where `t` runs from that start to the end of the word.
So a pass only needs the word endings from the allowed starts (a handful of
dictionary updates per word, not all substrings and all their prefixes), and
the first pass, where every start is allowed, does not depend on the
threshold: it is counted once for the whole search.

The result is tensorflow-text's vocabulary token for token (checked against
its learner in `tests/data/test_wordpiece_learner.py`). On the 26,738
distinct words of the bundled training novels it learns the 8,000-token
vocabulary of `make demo` several times faster than tensorflow-text's learner
(`benchmarks/data_benchmark.py`, figures in benchmarks/README.md). What is
left is mostly the greedy splitting of every word in the later passes.
"""

import collections


def _ranked(counts):
    """The keys of `counts` (a dict), most frequent first, ties alphabetical."""
    return [key for key, _ in sorted(sorted(counts.items()), key=lambda x: x[1], reverse=True)]


def _allowed_chars(word_counts, max_unique_chars):
    """The `max_unique_chars` most frequent characters (ties: alphabetical)."""
    char_counts = collections.defaultdict(int)
    for word, count in word_counts:
        for char in word:
            char_counts[char] += count
    ranked = _ranked(char_counts)
    if max_unique_chars is not None:
        ranked = ranked[: max(max_unique_chars, 0)]
    return set(ranked)


def _input_words(word_counts, reserved_tokens, max_token_length, max_unique_chars, max_input_tokens):
    """The words the learner uses, most frequent first (tensorflow-text's filters)."""
    kept = [(w, c) for w, c in word_counts if len(w) <= max_token_length and w not in reserved_tokens]
    allowed = _allowed_chars(kept, max_unique_chars)
    kept = sorted(kept, key=lambda x: x[1], reverse=True)
    if max_input_tokens is not None and max_input_tokens != -1:
        limit = max_input_tokens
    else:
        limit = len(kept)
    words = []
    for word, count in kept:
        if len(words) >= limit:
            break
        if all(char in allowed for char in word):
            words.append((word, count))
    return words


class _Search:
    """One learning problem: the filtered words and the threshold-free first pass."""

    def __init__(self, words, num_iterations, include_joiner_token, joiner, reserved_tokens,
                 split_alone=None):
        self.words = words
        self.num_iterations = num_iterations
        # With an empty joiner a suffix piece is spelled like a word-initial
        # one, and tensorflow-text counts the two as one token.
        # Without joiner tokens, `joiner + char` below is the character itself.
        self.joiner = joiner if include_joiner_token else ""
        self.reserved_tokens = list(reserved_tokens)
        self.chars = {char for word, _ in words for char in word}
        # The suffix piece of a character the tokenizer always splits off on its
        # own ("##北" when every CJK character is a word) can never be emitted.
        self.suffix_chars = {c for c in self.chars if not split_alone(c)} if split_alone else self.chars
        self.first = self._endings(((word, count, range(len(word))) for word, count in words))

    def _endings(self, words_and_starts):
        """Counts of the word endings from the given starts.

        Returns two dicts, word-initial pieces and joined suffix pieces; a
        string can be in both (a "word" starting with the joiner), and
        tensorflow-text keeps them apart while counting.
        """
        initial, joined = {}, {}
        joiner = self.joiner
        for word, count, starts in words_and_starts:
            for start in starts:
                if start and joiner:
                    piece = joiner + word[start:]
                    joined[piece] = joined.get(piece, 0) + count
                else:
                    piece = word[start:]
                    initial[piece] = initial.get(piece, 0) + count
        return initial, joined

    def _tokens(self, endings, thresh):
        """The pieces at or above `thresh`, plus every character (count 1 if new)."""
        initial, joined = endings
        # tensorflow-text walks from long pieces to short ones, the joiner not
        # counted in the length, so when a joined piece is spelled like a
        # word-initial one ("##a" after "b" and the word "##a") the joined
        # piece's count is written last and wins.
        tokens = {t: c for t, c in initial.items() if c >= thresh}
        tokens.update((t, c) for t, c in joined.items() if c >= thresh)
        for char in self.chars:
            tokens.setdefault(char, 1)
        for char in self.suffix_chars:
            tokens.setdefault(self.joiner + char, 1)
        return tokens

    def _split_starts(self, tokens):
        """Each word with the starts of its greedy longest-first split.

        Words that cannot be split (or are empty) are left out, as in
        tensorflow-text's `get_split_indices`.
        """
        joiner = self.joiner
        # A piece after the first is looked up without its joiner, among the
        # tokens spelled joiner + piece, so that no string is built per try.
        suffixes = {t[len(joiner):] for t in tokens if t.startswith(joiner)} if joiner else tokens
        # No piece is longer than the longest token it could be: shorter ends only.
        longest = max(map(len, tokens), default=0)
        longest_suffix = max(map(len, suffixes), default=0)
        for word, count in self.words:
            starts, start, length = [], 0, len(word)
            pieces, bound = tokens, longest
            while start < length:
                end = start + bound
                if end > length:
                    end = length
                while end > start and word[start:end] not in pieces:
                    end -= 1
                if end == start:
                    starts = None
                    break
                starts.append(start)
                start = end
                pieces, bound = suffixes, longest_suffix
            if starts:
                yield word, count, starts

    def vocabulary(self, thresh):
        """tensorflow-text's `learn_with_thresh`."""
        # No pass at all leaves the characters alone.
        tokens = self._tokens(self.first if self.num_iterations >= 1 else ({}, {}), thresh)
        for _ in range(1, self.num_iterations):
            tokens = self._tokens(self._endings(self._split_starts(tokens)), thresh)
        vocabulary = self.reserved_tokens + sorted(self.chars) + _ranked(tokens)
        return list(dict.fromkeys(vocabulary))


def learn(
    word_counts,
    vocab_size,
    reserved_tokens,
    upper_thresh=int(1e7),
    lower_thresh=10,
    num_iterations=4,
    max_input_tokens=int(5e6),
    max_token_length=50,
    max_unique_chars=1000,
    slack_ratio=0.05,
    include_joiner_token=True,
    joiner="##",
    split_alone=None,
):
    """tensorflow-text's `wordpiece_tokenizer_learner_lib.learn`: same arguments, same vocabulary.

    Where tensorflow-text's learner fails or does something of no use, this
    one differs: counts below 1 and `upper_thresh` below 1 are refused (a
    threshold of 0 would keep every substring), `max_input_tokens` and
    `max_unique_chars` may be None (no limit), and `word_counts` may be a
    dict or any iterable of (word, count) pairs, generators included.
    `split_alone` (not tensorflow-text's), a function of a character, names
    the characters a tokenizer always splits off as words of their own: their
    one-character suffix pieces (`##c`), never emitted, are left out.
    """
    word_counts = list(word_counts.items() if isinstance(word_counts, dict) else word_counts)
    counts = [count for _, count in word_counts]
    if not counts or min(counts) < 1:
        raise ValueError("`word_counts` must hold at least one word, every count at least 1.")
    if upper_thresh is not None and upper_thresh < 1:
        raise ValueError(f"`upper_thresh` must be at least 1 (or None), got {upper_thresh}.")
    upper = max(counts) if upper_thresh is None else min(max(counts), upper_thresh)
    lower = min(counts) if lower_thresh is None else max(min(counts), lower_thresh)
    words = _input_words(word_counts, reserved_tokens, max_token_length, max_unique_chars, max_input_tokens)
    search = _Search(words, num_iterations, include_joiner_token, joiner, reserved_tokens, split_alone)
    slack = max(slack_ratio * vocab_size, 0)
    while True:  # tensorflow-text's learn_binary_search, as a loop
        thresh = (upper + lower) // 2
        vocabulary = search.vocabulary(thresh)
        size = len(vocabulary)
        if (size <= vocab_size and vocab_size - size <= slack) or lower >= upper or thresh <= 1:
            return vocabulary
        if size > vocab_size:
            lower = thresh + 1
        else:
            upper = thresh - 1
