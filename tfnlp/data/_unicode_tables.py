"""The Unicode tables behind BERT's text normalisation (`_bert_text.py`).

BERT's `BasicTokenizer` asks Python's `unicodedata` and `str.lower` about
every character. The answers are collected into compact arrays: runs of a per-character value as
`(starts, values)` (the value of code point `c` is
`values[searchsorted(starts, c, "right") - 1]`), and sparse maps as sorted
`(keys, values)`. They are built by `build_tables()` from Python 3.11's
`unicodedata` (Unicode 14.0.0) and stored in `unicode_tables.npz` (read
once, not built in every process), so that tokenization does not change
with the Python version; `python -m tfnlp.data._unicode_tables`
writes the file again, and a test checks it against `build_tables()`.
"""

import functools
import os
import sys
import unicodedata

import numpy as np

# Pass-1 classes: what BERT's `_clean_text` and `_tokenize_chinese_chars` do
# to a character, and whether `_run_split_on_punc` splits at it.
KEEP, DROP, SPACE, CJK, PUNCT = range(5)

# BERT's "Chinese character" blocks (google-research/bert tokenization.py).
CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)
CAPITAL_SIGMA, FINAL_SIGMA = 0x03A3, 0x03C2
MAX_DECOMPOSITION = 4  # the longest NFD of one code point
# Hangul syllables decompose by arithmetic (Unicode 3.12), not by table.
HANGUL_FIRST, HANGUL_COUNT = 0xAC00, 11172


def _code_points():
    return (c for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF)


def character_class(c):
    """BERT's view of code point `c`: KEEP, DROP, SPACE, CJK or PUNCT."""
    char = chr(c)
    category = unicodedata.category(char)
    if c == 0 or c == 0xFFFD or (category in ("Cc", "Cf") and char not in "\t\n\r"):
        return DROP
    if category == "Zs" or char.isspace():  # BERT splits with `str.split()`: U+2028 too
        return SPACE
    if any(low <= c <= high for low, high in CJK_RANGES):
        return CJK
    if 33 <= c <= 47 or 58 <= c <= 64 or 91 <= c <= 96 or 123 <= c <= 126 or category.startswith("P"):
        return PUNCT
    return KEEP


def splits_alone(char):
    """Whether BERT always splits `char` off as a word of its own (CJK, punctuation)."""
    return len(char) == 1 and character_class(ord(char)) in (CJK, PUNCT)


def sigma_context(c):
    """How `str.lower` sees `c` around a capital sigma: 0 other, 1 cased, 2 case-ignorable.

    Python lower-cases U+03A3 to final sigma when, skipping case-ignorable
    characters, a cased character comes before it and none after it. The
    two properties are read off `str.lower` itself (Python does not expose
    them): ignorable characters are skipped, so a cased `A` before them
    still counts.
    """
    char = chr(c)
    if (char + "\u03a3").lower()[-1] == "\u03c2":
        return 1  # not skipped, and cased
    if ("A" + char + "\u03a3").lower()[-1] == "\u03c2":
        return 2  # skipped
    return 0


def _runs(values):
    """`(starts, values)` of the runs of equal values over all code points."""
    values = np.asarray(values, np.int32)
    starts = np.flatnonzero(np.diff(values, prepend=values[0] - 1)).astype(np.int32)
    return starts, values[starts]


PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unicode_tables.npz")


@functools.cache
def tables():
    """The stored tables, as NumPy arrays (read once per process)."""
    with np.load(PATH) as stored:
        return {name: stored[name] for name in stored.files if name != "unicode_version"}


def stored_unicode_version():
    with np.load(PATH) as stored:
        return str(stored["unicode_version"])


def build_tables():
    """The tables, from this Python's `unicodedata` (slow: every code point)."""
    classes = np.zeros(sys.maxunicode + 1, np.int32)
    marks = np.zeros_like(classes)
    combining = np.zeros_like(classes)
    sigma = np.zeros_like(classes)
    reorder = np.zeros_like(classes)
    lower_keys, lower_values, nfd_keys, nfd_values, strip_keys, strip_values = [], [], [], [], [], []
    for c in _code_points():
        char = chr(c)
        category = unicodedata.category(char)
        classes[c] = character_class(c)  # unassigned ones too: BERT's CJK blocks have gaps
        if category == "Cn":  # nothing else to say about an unassigned character
            continue
        marks[c] = category == "Mn"
        combining[c] = unicodedata.combining(char)
        sigma[c] = sigma_context(c)
        lower = char.lower()
        if HANGUL_FIRST <= c < HANGUL_FIRST + HANGUL_COUNT:
            continue  # no case, no marks; decomposed by arithmetic
        if lower != char:
            lower_keys.append(c)
            lower_values.append(ord(lower[0]))  # only U+0130 lowers to two: "i" + U+0307, a mark
        nfd = unicodedata.normalize("NFD", char)
        if nfd != char:
            nfd_keys.append(c)
            nfd_values.append([ord(d) for d in nfd] + [-1] * (MAX_DECOMPOSITION - len(nfd)))
        stripped = "".join(d for d in nfd if unicodedata.category(d) != "Mn")
        if stripped != char:
            strip_keys.append(c)
            strip_values.append([ord(d) for d in stripped] + [-1] * (MAX_DECOMPOSITION - len(stripped)))
        # Canonical order can move only combining characters (class > 0); marks are
        # dropped, so only the rare combining non-marks (U+1D165, ...) can end up reordered.
        reorder[c] = any(unicodedata.combining(d) and unicodedata.category(d) != "Mn" for d in nfd)
    result = {}
    for name, values in (("class", classes), ("mark", marks), ("combining", combining), ("sigma", sigma),
                         ("reorder", reorder)):
        result[name + "_starts"], result[name + "_values"] = _runs(values)
    result["lower_keys"] = np.asarray(lower_keys, np.int32)
    result["lower_values"] = np.asarray(lower_values, np.int32)
    result["nfd_keys"] = np.asarray(nfd_keys, np.int32)
    result["nfd_values"] = np.asarray(nfd_values, np.int32).reshape(-1, MAX_DECOMPOSITION)
    result["strip_keys"] = np.asarray(strip_keys, np.int32)
    result["strip_values"] = np.asarray(strip_values, np.int32).reshape(-1, MAX_DECOMPOSITION)
    return result


if __name__ == "__main__":
    built = build_tables()
    np.savez_compressed(PATH, unicode_version=np.asarray(unicodedata.unidata_version), **built)
    print(f"Unicode {unicodedata.unidata_version}: {PATH}")
    for name, array in built.items():
        print(f"{name}: {array.shape}")
