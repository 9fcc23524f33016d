import os

import numpy as np
import pytest

from tfnlp import datasets


# Attribution lines ("——《论语》", "作者：杜甫") recur across Chinese records.
@pytest.mark.parametrize(
    "name, total, max_shared", [("en_novels", 536, 0.05), ("zh_poems", 4843, 0.25)]
)
def test_documents_are_held_out_whole(name, total, max_shared):
    splits = {s: datasets.read_documents(name, s) for s in datasets.SPLITS}
    assert sum(len(d) for d in splits.values()) == total
    assert len(splits["test"]) >= 20 and len(splits["validation"]) >= 20
    train_sentences = {s for d in splits["train"] for s in d}
    test_documents = {tuple(d) for d in splits["test"]}
    assert not test_documents & {tuple(d) for d in splits["train"]}
    # Held-out chapters are whole chapters: most of their sentences are unseen.
    test_sentences = [s for d in splits["test"] for s in d]
    assert np.mean([s in train_sentences for s in test_sentences]) < max_shared


def test_load_documents_matches_read_documents():
    import tensorflow as tf

    assert datasets.load_documents("zh_poems", "test").element_spec == tf.TensorSpec([None], tf.string)
    loaded = [[s.decode() for s in doc.numpy()] for doc in datasets.load_documents("zh_poems", "test")]
    assert loaded == datasets.read_documents("zh_poems", "test")


@pytest.mark.parametrize("name", ["bible_en_es", "bible_archaic_modern"])
def test_text_pairs_hold_out_books(name):
    train = datasets.read_text_pairs(name, "train")
    test = datasets.read_text_pairs(name, "test")
    validation = datasets.read_text_pairs(name, "validation")
    assert len(train) > 29000 and len(test) > 1000 and len(validation) > 350
    assert all(source and target for source, target in train + test + validation)
    assert not {s for s, _ in test} & {s for s, _ in train[:5000]}
    pairs = list(datasets.load_text_pairs(name, "validation").take(3).as_numpy_iterator())
    assert [(s.decode(), t.decode()) for s, t in pairs] == validation[:3]


def test_spanish_pairs_are_spanish():
    source, target = datasets.read_text_pairs("bible_en_es", "test")[0]
    assert "the" in source.lower().split() and any(w in target.lower().split() for w in ("y", "de", "el"))


@pytest.mark.parametrize("loader, args", [
    (datasets.load_documents, ("en_novel", "train")),
    (datasets.load_documents, ("en_novels", "dev")),
    (datasets.load_text_pairs, ("bible", "train")),
])
def test_bad_names_are_clear_errors(loader, args):
    with pytest.raises(ValueError, match="must be one of"):
        loader(*args)


def test_shipped_data_stays_small_and_licensed():
    files = [f for f in os.listdir(datasets.DATA_DIR) if f != "LICENSES.md"]
    total = sum(os.path.getsize(os.path.join(datasets.DATA_DIR, f)) for f in files)
    assert total < 15 * 2**20
    licences = open(os.path.join(datasets.DATA_DIR, "LICENSES.md"), encoding="utf-8").read()
    for f in files:
        assert f"`{f}`" in licences, f"{f} has no licence note"
