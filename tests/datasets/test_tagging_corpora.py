"""The bundled tagging corpora (UD English-EWT UPOS, UniversalNER English-EWT) against their releases."""

import functools
import re

import pytest

from tfnlp import datasets

# (sentences, words): EWT's from its stats.xml (v2.16), UNER's from its en_ewt-ud-*.stats files.
RELEASED = {
    ("en_ewt_upos", "train"): (12544, 204577),
    ("en_ewt_upos", "validation"): (2001, 25147),
    ("en_ewt_upos", "test"): (2077, 25094),
    ("en_uner_ewt", "validation"): (2001, 25149),
    ("en_uner_ewt", "test"): (2077, 25097),
}
UD_UPOS = {
    "ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN",
    "PUNCT", "SCONJ", "SYM", "VERB", "X",
}
UNER_IOB2 = {"O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"}


@functools.cache
def load(name, split):
    return datasets.load_tagged(name, split)


@pytest.mark.parametrize("name, split", sorted(RELEASED))
def test_counts_equal_the_released_statistics(name, split):
    data = load(name, split)
    assert (len(data), data.num_words) == RELEASED[name, split]
    assert data.path.endswith(".tsv.gz")
    ids = data.sentence_ids
    assert None not in ids and len(set(ids)) == len(ids)
    # Words are single, non-empty tokens: no whitespace inside or around them.
    words = "\0".join(w for sentence in data.words for w in sentence)
    assert not re.search(r"\s|\0\0", words)


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_upos_tags_are_the_17_ud_tags(split):
    data = load("en_ewt_upos", split)
    assert data.tag_names == list(datasets.UPOS_TAGS)
    assert {tag for tags in data.tags for tag in tags} == UD_UPOS


@pytest.mark.parametrize("split", ["validation", "test"])
def test_uner_tags_are_iob2_per_org_loc(split):
    data = load("en_uner_ewt", split)
    assert data.tag_names == list(datasets.UNER_TAGS)
    assert {tag for tags in data.tags for tag in tags} == UNER_IOB2
    # Every I-X continues an entity of type X (the released files have no stray I- tag).
    for tags in data.tags:
        for previous, tag in zip(["O", *tags], tags, strict=False):
            assert not tag.startswith("I-") or previous[2:] == tag[2:], (previous, tag)


@pytest.mark.parametrize("split", ["validation", "test"])
def test_uner_tags_the_sentences_of_ewt(split):
    """UNER was made on EWT v2.9: the same sentences, retokenized in 3 of them since (v2.16)."""
    upos, uner = load("en_ewt_upos", split), load("en_uner_ewt", split)
    words = dict(zip(upos.sentence_ids, upos.words, strict=True))
    assert set(words) == set(uner.sentence_ids)
    changed = [i for i, w in zip(uner.sentence_ids, uner.words, strict=True) if words[i] != w]
    assert len(changed) == 3, changed


def test_names_are_listed():
    assert {"en_ewt_upos", "en_uner_ewt"} <= set(datasets.list_datasets())


@pytest.mark.parametrize("args, message", [
    (("en_ewt", "train"), "`name` must be one of"),
    (("en_ewt_upos", "dev"), "`split` must be one of"),
    (("en_uner_ewt", "train"), "'train' of 'en_uner_ewt' is not bundled.*split='validation'"),
])
def test_bad_names_and_splits_are_clear_errors(args, message):
    with pytest.raises(ValueError, match=message):
        datasets.load_tagged(*args)
