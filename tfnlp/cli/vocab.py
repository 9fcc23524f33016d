"""`tfnlp vocab`: a WordPiece (BERT, UniLM) or words (ELMo's softmax) vocabulary learned from a corpus."""

from tfnlp.cli import _runs
from tfnlp.cli._loading import data
from tfnlp.cli._settings import (
    CORPUS_HELP,
    TEXT_COLUMN,
    ConfigError,
    add_options,
    check_common,
    read_settings,
)

SCHEMA = {
    "corpus": (str, None, CORPUS_HELP, None),
    "text_column": TEXT_COLUMN,
    "kind": (str, "wordpiece", "WordPiece (BERT, UniLM) or words (ELMo's softmax)", ("wordpiece", "words")),
    "size": (int, 8000, "vocabulary size", None),
    "output": (str, None, "file to write, one token per line", None),
}
# The reserved tokens: [PAD] [UNK] [CLS] [SEP] [MASK]; <S> </S> <UNK> for words.
RESERVED = {"wordpiece": 5, "words": 3}


def add_parser(commands, argv=()):
    """The `vocab` sub-command."""
    add_options(commands.add_parser("vocab", help="learn a vocabulary from a corpus"), SCHEMA)


def schema(args):
    """The settings of `tfnlp vocab`."""
    return SCHEMA


def configure(args):
    """The checked settings of `args`; a `ConfigError` names what is wrong."""
    settings = read_settings(args, SCHEMA)
    check_common(settings)
    reserved = RESERVED[settings["kind"]]
    if settings["size"] <= reserved:
        raise ConfigError(
            f"`size` must exceed the {reserved} reserved tokens of a {settings['kind']} "
            f"vocabulary, got {settings['size']}."
        )
    return settings


def run(args, settings):
    """Learns the vocabulary and writes it, one token a line."""
    documents = _runs.read_corpus(settings["corpus"], settings["text_column"])
    sentences = [s for d in documents for s in d]
    if settings["kind"] == "words":
        vocabulary = data.build_word_vocabulary(sentences, settings["size"])
    else:
        vocabulary = data.learn_wordpiece_vocabulary(sentences, settings["size"], progress=False)
    _runs.write_lines(settings["output"], vocabulary)
    print(f"{len(vocabulary)} tokens written to {settings['output']}")
    return 0
