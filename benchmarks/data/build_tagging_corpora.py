"""Builds the bundled tagging corpora of `tfnlp.datasets.load_tagged` from git snapshots.

Writes, into `tfnlp/datasets/data/` (or `--output-dir`):

- `en_ewt_upos_{train,dev,test}.tsv.gz`: Universal Dependencies English-EWT,
  the FORM and UPOS of every syntactic word;
- `en_uner_ewt_{dev,test}.tsv.gz`: UniversalNER English-EWT, token and IOB2
  tag (PER, ORG, LOC). UNER's train file is over the size a snapshot holds and
  its repository has nothing to rebuild it from (no per-document sources, no
  stand-off annotations), so it is not bundled.

Each file holds, per sentence, a `# sent_id = ...` line, one `word<TAB>tag`
line per word and a blank line: what `tfnlp.data.read_conll(path,
word_column=0, tag_column=1)` reads. Every other column and comment is left
out.

EWT's released train file (about 14 MB) is absent from a snapshot; it is
rebuilt as the treebank's own `not-to-release/tools/build.py` does: the
per-document files `not-to-release/sources/<file>` concatenated in the order of
`not-to-release/file-lists/files.<split>`. All three splits are built that way,
and each must hash to the git blob of the released `en_ewt-ud-<split>.conllu`
(byte-identical), and count the sentences and syntactic words (integer IDs;
multiword ranges `1-2` and empty nodes `1.1` are not words) that `stats.xml`
states. UNER's files must count what their `.stats` files state.

Usage (two git directories, e.g. from `git clone --mirror`; a snapshot that
lacks the files over about 4 MiB will do: only the pinned commits are read,
and none of the files it needs is that large):

    python benchmarks/data/build_tagging_corpora.py \\
        --ewt-git-dir UD_English-EWT.git --uner-git-dir UNER_English-EWT.git

The output is byte-identical from run to run (gzip level 9, mtime 0, no file
name in the header) with the same zlib; the uncompressed text is identical
everywhere.
"""

import argparse
import collections
import gzip
import hashlib
import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET

# UD English-EWT v2.16 (tag r2.16; master's later commits change only eval.log).
EWT_COMMIT = "4c89b5833a70aa5ed3a00bad2f23f57992cc7df8"
# UniversalNER English-EWT master (2024-07-29); dev/test last changed 2023-08-18 (8988700).
# Its sentences and tokens are those of UD English-EWT v2.9 (r2.9, c491d62), as its README says.
UNER_COMMIT = "8ed072de2fd24022cc62458997fe96a8fe191ea4"

EWT_SPLITS = ("train", "dev", "test")
UNER_SPLITS = ("dev", "test")
UPOS_TAGS = frozenset(
    "ADJ ADP ADV AUX CCONJ DET INTJ NOUN NUM PART PRON PROPN PUNCT SCONJ SYM VERB X".split())
UNER_TAGS = frozenset({"O"} | {f"{p}-{t}" for p in "BI" for t in ("PER", "ORG", "LOC")})
# What read_conll takes for a `# key = value` comment at a sentence's start.
_KEY_VALUE_COMMENT = re.compile(r"# *[^\s=]+ *=")
DEFAULT_OUTPUT = os.path.join(os.path.dirname(__file__), "..", "..", "tfnlp", "datasets", "data")


def git_blobs(git_dir, commit, paths):
    """The bytes of `paths` at `commit`, in one `git cat-file --batch`; a missing one is an error."""
    request = "".join(f"{commit}:{path}\n" for path in paths).encode()
    out = subprocess.run(["git", "--git-dir", git_dir, "cat-file", "--batch"], input=request,
                         capture_output=True, check=True).stdout
    blobs, at = [], 0
    for path in paths:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        if len(header) != 3 or header[1] != b"blob":
            raise SystemExit(f"{git_dir}: {commit}:{path} is not here ({out[at:end].decode()}).")
        size = int(header[2])
        blobs.append(out[end + 1:end + 1 + size])
        at = end + 1 + size + 1
    return blobs


def git_blob_id(git_dir, commit, path):
    line = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", commit, "--", path],
                          capture_output=True, text=True, check=True).stdout.split()
    return line[2]


def blob_id(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def conllu_sentences(text):
    """(sent_id, [(form, upos), ...]) per sentence, syntactic words only."""
    sentences, sent_id, words = [], None, []
    for line in text.split("\n"):
        if not line:
            if words:
                sentences.append((sent_id, words))
            sent_id, words = None, []
        elif line.startswith("# sent_id = "):
            sent_id = line[len("# sent_id = "):]
        elif not line.startswith("#"):
            fields = line.split("\t")
            assert len(fields) == 10, line
            if fields[0].isdigit():  # not "1-2" (multiword token) nor "1.1" (empty node)
                words.append((fields[1], fields[3]))
    assert not words, "the file does not end with a blank line"
    return sentences


def iob2_sentences(text):
    """(sent_id, [(token, tag), ...]) per sentence of a UNER file (index, token, tag, -, annotator)."""
    sentences, sent_id, words = [], None, []
    for line in text.split("\n"):
        if not line:
            if words:
                sentences.append((sent_id, words))
            sent_id, words = None, []
        elif line.startswith("# sent_id = "):
            sent_id = line[len("# sent_id = "):]
        elif not line.startswith("#"):
            fields = line.split("\t")
            assert len(fields) == 5 and fields[0] == str(len(words) + 1), line
            words.append((fields[1], fields[2]))
    assert not words, "the file does not end with a blank line"
    return sentences


def check(name, sentences, tag_set, expected_sentences, expected_words):
    ids = [sent_id for sent_id, _ in sentences]
    assert None not in ids and len(set(ids)) == len(ids), f"{name}: missing or repeated sent_id"
    counts = (len(sentences), sum(len(words) for _, words in sentences))
    assert counts == (expected_sentences, expected_words), (name, counts)
    tags = collections.Counter(tag for _, words in sentences for _, tag in words)
    assert set(tags) == tag_set, (name, sorted(tags))
    for sent_id, words in sentences:
        for i, (word, _) in enumerate(words):
            assert word and word == word.strip() and not set(word) & set("\t\n\r"), (sent_id, word)
            assert not (i == 0 and _KEY_VALUE_COMMENT.match(word)), (sent_id, word)
    spaced = sum(" " in word for _, words in sentences for word, _ in words)
    print(f"{name}: {counts[0]} sentences, {counts[1]} words, {len(tags)} tags, "
          f"{spaced} words with a space")


def write(path, sentences):
    lines = []
    for sent_id, words in sentences:
        lines.append(f"# sent_id = {sent_id}\n")
        lines.extend(f"{word}\t{tag}\n" for word, tag in words)
        lines.append("\n")
    with open(path, "wb") as f, gzip.GzipFile("", "wb", 9, f, mtime=0) as z:
        z.write("".join(lines).encode("utf-8"))
    print(f"  {path}: {os.path.getsize(path)} bytes")


def build_ewt(git_dir, output_dir):
    (stats,) = git_blobs(git_dir, EWT_COMMIT, ["stats.xml"])
    size = ET.fromstring(stats).find("size")
    for split in EWT_SPLITS:
        (file_list,) = git_blobs(git_dir, EWT_COMMIT, [f"not-to-release/file-lists/files.{split}"])
        sources = [f"not-to-release/sources/{line.strip()}"
                   for line in file_list.decode().splitlines() if line.strip()]
        data = b"".join(git_blobs(git_dir, EWT_COMMIT, sources))
        released = git_blob_id(git_dir, EWT_COMMIT, f"en_ewt-ud-{split}.conllu")
        assert blob_id(data) == released, f"{split}: the rebuild differs from the released file"
        sentences = conllu_sentences(data.decode("utf-8"))
        expected = size.find(split)
        check(f"en_ewt_upos {split}", sentences, UPOS_TAGS,
              int(expected.findtext("sentences")), int(expected.findtext("words")))
        write(os.path.join(output_dir, f"en_ewt_upos_{split}.tsv.gz"), sentences)


def build_uner(git_dir, output_dir):
    for split in UNER_SPLITS:
        text, stats = git_blobs(git_dir, UNER_COMMIT,
                                [f"en_ewt-ud-{split}.iob2", f"en_ewt-ud-{split}.stats"])
        stats = json.loads(stats)
        sentences = iob2_sentences(text.decode("utf-8"))
        check(f"en_uner_ewt {split}", sentences, UNER_TAGS, stats["num_sentences"],
              stats["num_tokens"])
        violations = [
            sent_id for sent_id, words in sentences
            for (_, previous), (_, tag) in zip([("", "O")] + words, words, strict=False)
            if tag.startswith("I-") and previous[2:] != tag[2:]
        ]
        print(f"  I-X not after B-X or I-X: {len(violations)} {violations[:5]}")
        write(os.path.join(output_dir, f"en_uner_ewt_{split}.tsv.gz"), sentences)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ewt-git-dir", required=True, help="git dir of UD_English-EWT")
    parser.add_argument("--uner-git-dir", required=True, help="git dir of UNER_English-EWT")
    parser.add_argument("--output-dir", default=DEFAULT_OUTPUT)
    args = parser.parse_args()
    os.makedirs(args.output_dir, exist_ok=True)
    build_ewt(args.ewt_git_dir, args.output_dir)
    build_uner(args.uner_git_dir, args.output_dir)


if __name__ == "__main__":
    main()
