"""tfnlp layers: the building blocks of every tfnlp model."""

from tfnlp.layers import masks
from tfnlp.layers.masked_lm_head import MaskedLMHead
from tfnlp.layers.multi_head_attention import MultiHeadAttention
from tfnlp.layers.position_embedding import PositionEmbedding
from tfnlp.layers.sinusoidal_position_encoding import SinusoidalPositionEncoding
from tfnlp.layers.token_logits import TokenLogits
from tfnlp.layers.transformer_block import TransformerBlock
from tfnlp.layers.transformer_decoder_block import TransformerDecoderBlock

__all__ = [
    "MaskedLMHead",
    "MultiHeadAttention",
    "PositionEmbedding",
    "SinusoidalPositionEncoding",
    "TokenLogits",
    "TransformerBlock",
    "TransformerDecoderBlock",
    "masks",
]
