"""course_lib: the code behind the Understanding Transformers course.

Chapters import from here instead of copying helpers from page to page:

    from course_lib import scaled_dot_product_attention, cross_entropy, attention_heatmap

Modules, one concept each: ``attention`` (softmax, masks, multi-head attention, positions),
``loss`` (cross-entropy, perplexity, its gradient), ``plotting`` (the course's figures),
``rnn`` (the recurrence measurements of Chapter 1).
"""
from .attention import (
    LearnedPositionalEmbedding,
    MultiHeadAttention,
    causal_mask,
    merge_heads,
    padding_mask,
    scaled_dot_product_attention,
    sinusoidal_positions,
    softmax,
    split_heads,
)
from .loss import cross_entropy, cross_entropy_grad, log_softmax, perplexity
from .glue import glue
from .plotting import attention_heatmap, bar_probs, loss_curve, positional_heatmap

__version__ = "0.1.0"
