"""`WordPieceTokenizer` gives BERT's ids: Google's tokenizer and `transformers.BertTokenizer`.

Three oracles: google-research/bert's `tokenization.py` (ported in
`google_bert_tokenization.py`, pure Python on `unicodedata`), Hugging Face's
`transformers.BertTokenizer` (the Rust `tokenizers` one), and every code
point of Unicode put between two letters. Hugging Face's tables are older
than Python's and differ from Google's on a few characters (docs/data.md):
the stream compared with it is drawn from characters whose properties have
not changed since Unicode 3.2.
"""

import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from tests.data import google_bert_tokenization as google
from tfnlp import data
from tfnlp.data import _bert_text

# Real lines of the kinds that broke the NFKC normaliser: full-width forms,
# CJK, Arabic, accented Latin, emoji, combining marks, Korean, Greek, Hindi.
MULTILINGUAL = [
    "１９９８年，ＧＤＰ增长了７．８％……",
    "人民日报：北京市今天召开会议（记者　张三）",
    "東京都の人口は約１４００万人です。",
    "서울특별시는 대한민국의 수도이다.",
    "القاهرة هي عاصمة مصر، وأكبر مدنها.",
    "Ça coûte 12,50 € — très cher ! Ærøskøbing, Zürich, São Paulo, Kraków.",
    "naïve café résumé Ångström ﬁnance ½ x² ㎏ ℃",
    "Die Straße ist naß; STRASSE. İstanbul'da ıslak.",
    "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.",
    "नमस्ते दुनिया, यह एक परीक्षण है।",
    "I ❤️ NY 🗽👍🏽 👨‍👩‍👧 — emoji, ZWJ and skin tones",
    "combining: e\u0301 a\u0308 n\u0303 o\u0332 Z\u0335\u0336",
    "zero\u200bwidth soft\u00adhyphen left\u200eto\u200fright tab\there\nnew line",
    "«Guillemets» „Anführungszeichen“ ‘quotes’ ¿Qué? ¡Sí!",
    "Tiếng Việt có dấu: Nguyễn Thị Minh Khai",
    "עברית: שָׁלוֹם עֲלֵיכֶם",
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
]


def _vocabulary(texts, lower_case):
    """A vocabulary that spells the texts' words in many ways: characters, suffixes, some words."""
    words = sorted({w for t in texts for w in google.BasicTokenizer(lower_case).tokenize(t)})
    tokens = list(data.SPECIAL_TOKENS)
    tokens += sorted({c for w in words for c in w}) + sorted({"##" + c for w in words for c in w[1:]})
    tokens += words[::2] + ["##" + w[len(w) // 2:] for w in words[1::3] if len(w) > 3]
    return list(dict.fromkeys(tokens))


def _hugging_face(vocabulary, lower_case, tmp_path):
    transformers = pytest.importorskip("transformers")
    path = tmp_path / f"vocab_{lower_case}.txt"
    path.write_text("".join(t + "\n" for t in vocabulary), encoding="utf-8")
    tokenizer = transformers.BertTokenizer(str(path), do_lower_case=lower_case)
    return lambda texts: tokenizer(texts, add_special_tokens=False)["input_ids"]


def _ours(vocabulary, lower_case, texts):
    tokenizer = data.WordPieceTokenizer(vocabulary, lower_case=lower_case)
    return tokenizer(tf.constant([t.encode("utf-8") for t in texts])).to_list()


def _random_texts(rng, count, alphabet):
    """Texts of 0-24 characters from `alphabet`, a third of them spaces or ASCII."""
    texts = []
    for _ in range(count):
        n = int(rng.integers(0, 25))
        chars = rng.choice(alphabet, n)
        ascii_ = rng.integers(32, 127, n)
        pick = rng.random(n)
        texts.append("".join(
            " " if p < 0.15 else chr(a) if p < 0.35 else chr(c) for p, a, c in zip(pick, ascii_, chars, strict=True)
        ))
    return texts


def _all_code_points():
    return np.array([c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF])


def _stable_code_points():
    """Assigned by Unicode 3.2 with the same category and NFD today, not private use."""
    old = unicodedata.ucd_3_2_0
    return np.array([
        c for c in range(0x30000) if not 0xD800 <= c <= 0xDFFF
        and old.category(chr(c)) != "Cn" and old.category(chr(c)) == unicodedata.category(chr(c))
        and unicodedata.category(chr(c)) != "Co"
        and old.normalize("NFD", chr(c)) == unicodedata.normalize("NFD", chr(c))
    ])


@pytest.mark.parametrize("lower_case", [True, False])
def test_multilingual_lines_give_hugging_face_s_and_google_s_ids(lower_case, tmp_path):
    vocabulary = _vocabulary(MULTILINGUAL, lower_case)
    ours = _ours(vocabulary, lower_case, MULTILINGUAL)
    assert ours == _hugging_face(vocabulary, lower_case, tmp_path)(MULTILINGUAL)
    reference = google.FullTokenizer(vocabulary, do_lower_case=lower_case)
    assert ours == [reference.ids(t) for t in MULTILINGUAL]
    unk = vocabulary.index("[UNK]")
    assert sum(map(len, ours)) > 300 and all(i != unk for ids in ours for i in ids)


@pytest.mark.parametrize("lower_case", [True, False])
def test_full_width_forms_stay_apart_from_ascii(lower_case):
    vocabulary = list(data.SPECIAL_TOKENS) + ["1998", "１", "９", "##９", "##８", "，", ",", "gdp", "ｇ", "##ｄ", "##ｐ",
                                              "GDP", "Ｇ"]
    ids = _ours(vocabulary, lower_case, ["１９９８，ＧＤＰ", "1998,GDP"])
    spelled = [[vocabulary[i] for i in row] for row in ids]
    if lower_case:
        assert spelled == [["１", "##９", "##９", "##８", "，", "ｇ", "##ｄ", "##ｐ"], ["1998", ",", "gdp"]]
    else:
        # Cased, "ＧＤＰ" is one word with no "##Ｄ" to spell it: one [UNK].
        assert spelled == [["１", "##９", "##９", "##８", "，", "[UNK]"], ["1998", ",", "GDP"]]


@pytest.mark.parametrize("lower_case", [True, False])
def test_a_random_stream_of_any_unicode_gives_google_s_ids(lower_case):
    rng = np.random.default_rng(38 + lower_case)
    code_points = _all_code_points()
    assigned = code_points[[unicodedata.category(chr(c)) != "Cn" for c in code_points]]
    texts = _random_texts(rng, 1500, code_points) + _random_texts(rng, 1500, assigned)
    texts += _random_texts(rng, 1000, assigned[:0x3000])  # Latin, Greek, Cyrillic, marks, symbols...
    vocabulary = _vocabulary(texts, lower_case)
    reference = google.FullTokenizer(vocabulary, do_lower_case=lower_case)
    assert _ours(vocabulary, lower_case, texts) == [reference.ids(t) for t in texts]


@pytest.mark.parametrize("lower_case", [True, False])
def test_a_random_stream_of_stable_unicode_gives_hugging_face_s_ids(lower_case, tmp_path):
    rng = np.random.default_rng(380 + lower_case)
    stable = _stable_code_points()
    if lower_case:  # Hugging Face lower-cases character by character: no final sigma
        stable = stable[stable != 0x03A3]
    texts = _random_texts(rng, 2500, stable) + _random_texts(rng, 1500, stable[:1500])
    vocabulary = _vocabulary(texts, lower_case)
    assert _ours(vocabulary, lower_case, texts) == _hugging_face(vocabulary, lower_case, tmp_path)(texts)


@pytest.mark.parametrize("lower_case", [True, False])
def test_every_code_point_between_two_letters_splits_as_google_s(lower_case):
    code_points = _all_code_points()
    code_points = np.concatenate([code_points[code_points < 0x10000], code_points[code_points >= 0x10000][::7]])
    texts = ["A" + chr(c) + "b" for c in code_points]
    ours = _bert_text.bert_words(tf.constant([t.encode("utf-8") for t in texts]), lower_case).to_list()
    reference = google.BasicTokenizer(lower_case)
    mismatches = [
        (hex(c), words, reference.tokenize(t))
        for c, t, words in zip(code_points, texts, ours, strict=True)
        if [w.decode("utf-8") for w in words] != reference.tokenize(t)
    ]
    assert not mismatches, mismatches[:10]


def test_greek_final_sigma_is_python_s_lower():
    words = _bert_text.bert_words(tf.constant(["ΟΔΟΣ ΟΔΟΣ. ΣΑ Σ AΣ' Σ̈Α ΑΣ̈"]), True).to_list()[0]
    expected = google.BasicTokenizer(True).tokenize("ΟΔΟΣ ΟΔΟΣ. ΣΑ Σ AΣ' Σ̈Α ΑΣ̈")
    assert [w.decode() for w in words] == expected
    assert expected[:2] == ["οδος", "οδος"]


def test_the_stored_unicode_tables_are_python_s():
    from tfnlp.data import _unicode_tables

    if unicodedata.unidata_version != _unicode_tables.stored_unicode_version():
        pytest.skip(f"this Python has Unicode {unicodedata.unidata_version}, the tables "
                    f"{_unicode_tables.stored_unicode_version()}")
    stored, built = _unicode_tables.tables(), _unicode_tables.build_tables()
    assert sorted(stored) == sorted(built)
    for name in built:
        np.testing.assert_array_equal(stored[name], built[name], err_msg=name)
