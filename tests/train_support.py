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
    # pinned: these tests are about the CPU path, and "auto" would take a GPU where there is one
    # (the CUDA tests ask for it by name)
    device="cpu",
)


def tiny_trainer(**overrides) -> Trainer:
    """A Trainer on TINY with ``overrides`` (any TrainConfig field)."""
    cfg = TrainConfig(**{**TINY, **overrides})
    tok, train, val = corpus_tokens(cfg)
    return Trainer(cfg, train, val, tok.vocab_size, tokenizer=tok)


def exercise_setup(stem: str, exercise: str, setup_id: str):
    """A training exercise's solution notebook, run up to the exercise in this process (its
    ``setup`` cell and the exercise's own set-up cell ``setup_id``): -> (env, answer source,
    the exercise's spec, its check named ``train_briefly...``). The thread count is restored
    after the set-up cells, which set their own."""
    import nbformat
    import torch

    from course_lib.grading.spec import load_spec
    from tools.exercises import SOLUTIONS

    nb = nbformat.read(SOLUTIONS / f"{stem}.ipynb", as_version=4)
    ex = load_spec(nb, stem).exercise(exercise)
    cells = {c.id: c.source for c in nb.cells}
    env: dict = {}
    threads = torch.get_num_threads()
    exec(cells["setup"], env)
    exec(cells[setup_id], env)
    torch.set_num_threads(threads)
    train_check = next(c for c in ex.checks if c.name.startswith("train_briefly"))
    return env, cells[ex.answer_id], ex, train_check
