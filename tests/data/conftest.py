import pytest

from tfnlp import data, datasets


@pytest.fixture(scope="session")
def corpus_vocabulary():
    """A WordPiece vocabulary learned from the bundled training texts (mixed scripts)."""
    texts = [s for d in datasets.read_documents("en_novels", "train")[:120] for s in d]
    texts += [s for d in datasets.read_documents("zh_poems", "train")[:800] for s in d]
    texts += [t for t, _ in datasets.read_fine_food_reviews("train")[:500]]
    texts += [t for _, t in datasets.read_text_pairs("bible_en_es", "train")[:2000]]
    return data.learn_wordpiece_vocabulary(texts, 4000, progress=False)
