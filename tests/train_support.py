"""A tiny training configuration and trainer shared by the trainer and device tests."""

from __future__ import annotations

from course_lib.train import TrainConfig, Trainer, corpus_tokens

# Two layers of width 32 on the synthetic corpus: a full run takes well under a second.
TINY = dict(
    model=dict(block_size=16, n_layer=2, n_head=2, d_model=32),
    batch_size=8,
    max_steps=60,
    lr=3e-3,
    min_lr=3e-4,
    warmup_steps=10,
    eval_interval=20,
    eval_batches=4,
    eval_batch_size=16,
    corpus="synthetic",
    name="tiny",
)


def tiny_trainer(**overrides) -> Trainer:
    """A Trainer on TINY with ``overrides`` (any TrainConfig field)."""
    cfg = TrainConfig(**{**TINY, **overrides})
    tok, train, val = corpus_tokens(cfg)
    return Trainer(cfg, train, val, tok.vocab_size, tokenizer=tok)
