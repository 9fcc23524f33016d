"""tfnlp layers: the building blocks of every tfnlp model."""

from tfnlp.layers import masks
from tfnlp.layers.activations import gelu, gelu_approximate
from tfnlp.layers.char_cnn_embedding import ELMO_FILTERS, CharCNNEmbedding
from tfnlp.layers.crf import CRF, bio_transitions
from tfnlp.layers.dropout import Dropout
from tfnlp.layers.highway import Highway
from tfnlp.layers.layer_normalization import LayerNormalization
from tfnlp.layers.masked_lm_head import MaskedLMHead
from tfnlp.layers.multi_head_attention import MultiHeadAttention
from tfnlp.layers.position_embedding import PositionEmbedding
from tfnlp.layers.projected_lstm import ProjectedLSTM
from tfnlp.layers.scalar_mix import ScalarMix
from tfnlp.layers.sinusoidal_position_encoding import SinusoidalPositionEncoding
from tfnlp.layers.token_logits import TokenLogits
from tfnlp.layers.transformer_block import TransformerBlock
from tfnlp.layers.transformer_decoder_block import TransformerDecoderBlock
from tfnlp.layers.word_softmax import WordSoftmax

__all__ = [
    "CRF",
    "CharCNNEmbedding",
    "Dropout",
    "ELMO_FILTERS",
    "Highway",
    "LayerNormalization",
    "MaskedLMHead",
    "MultiHeadAttention",
    "PositionEmbedding",
    "ProjectedLSTM",
    "ScalarMix",
    "SinusoidalPositionEncoding",
    "TokenLogits",
    "TransformerBlock",
    "TransformerDecoderBlock",
    "WordSoftmax",
    "bio_transitions",
    "gelu",
    "gelu_approximate",
    "masks",
]
