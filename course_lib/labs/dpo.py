"""Direct preference optimisation (DPO; Rafailov et al. 2023), from scratch (Chapter 13).

RLHF (Ouyang et al. 2022) fits a reward model to human preferences, then maximises the reward
with reinforcement learning while a KL penalty keeps the policy near a frozen reference.
Rafailov et al. showed that the optimum of that objective can be written in closed form,
so the policy can be trained directly on preference pairs (a prompt x, a chosen answer y_w,
a rejected answer y_l), with the loss (their equation 7)

    L = -E[ log σ( β log π(y_w|x)/π_ref(y_w|x) - β log π(y_l|x)/π_ref(y_l|x) ) ]

where r(x, y) = β log π(y|x)/π_ref(y|x) is the policy's *implicit reward*. β sets how
far the policy may move: a small β needs a large change of log-ratios for the same loss.

Here: ``dpo_loss`` (the equation) and its gradient by hand (``dpo_loss_grad``; the tests
compare with autograd); preference pairs from the instruction set (``preference_pairs``:
the right answer against another word of the same line or a wrong label); a training loop
(``dpo_train``) and the measurements (``preference_metrics``: preference accuracy, reward
margin and the drift from the reference, the mean per-token KL divergence).
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..data import CharTokenizer
from .evaluate import completion_logprobs
from .instruct import END, END_MARKS, Example, format_prompt, line_words

__all__ = [
    "dpo_loss",
    "dpo_loss_grad",
    "Pair",
    "preference_pairs",
    "encode_pairs",
    "dpo_train",
    "token_kl",
    "preference_metrics",
]


def dpo_loss(
    pi_chosen: torch.Tensor,
    pi_rejected: torch.Tensor,
    ref_chosen: torch.Tensor,
    ref_rejected: torch.Tensor,
    beta: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The DPO loss (mean over the batch) and the implicit rewards of the chosen and rejected
    answers. Inputs (B,): sequence log-probabilities log π(y|x) of the policy and of the
    frozen reference. Returns loss (), reward_chosen (B,), reward_rejected (B,)."""
    if beta <= 0:
        raise ValueError(f"dpo_loss: beta must be > 0; got {beta}.")
    if not pi_chosen.shape == pi_rejected.shape == ref_chosen.shape == ref_rejected.shape:
        raise ValueError("dpo_loss: the four log-probability tensors must have one shape (B,).")
    reward_chosen = beta * (pi_chosen - ref_chosen)  # (B,)
    reward_rejected = beta * (pi_rejected - ref_rejected)  # (B,)
    # -log σ(z) written as softplus(-z): exact for large |z|, where log(sigmoid) underflows
    loss = F.softplus(-(reward_chosen - reward_rejected)).mean()
    return loss, reward_chosen.detach(), reward_rejected.detach()


def dpo_loss_grad(
    pi_chosen: torch.Tensor,
    pi_rejected: torch.Tensor,
    ref_chosen: torch.Tensor,
    ref_rejected: torch.Tensor,
    beta: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """dL/d pi_chosen and dL/d pi_rejected (B,) by hand: with z = r_w - r_l,
    d(-log σ(z))/dz = -σ(-z), so dL/d pi_chosen = -β σ(-z)/B and dL/d pi_rejected =
    +β σ(-z)/B: the pair's weight σ(-z) is large while the policy still ranks it wrongly."""
    z = beta * ((pi_chosen - ref_chosen) - (pi_rejected - ref_rejected))  # (B,)
    w = torch.sigmoid(-z) * beta / z.numel()  # (B,)
    return -w, w


@dataclass(frozen=True)
class Pair:
    """A preference pair: the prompt text (template, ends with the response token), the
    chosen and the rejected answer (each ends with the end token)."""

    prompt: str
    chosen: str
    rejected: str


def _wrong_answer(ex: Example, rng: random.Random) -> str:
    """A plausible wrong answer: another word of the line, or another end-mark name."""
    if ex.instruction == "End mark?":
        return rng.choice(sorted(set(END_MARKS.values()) | {"none"} - {ex.response}))
    words = [w for w in line_words(ex.input) if w != ex.response]
    return rng.choice(words) if words else ex.response[::-1] + "s"


def preference_pairs(examples: list[Example], seed: int = 0) -> list[Pair]:
    """One pair per example: the right answer chosen, a wrong one (``_wrong_answer``)
    rejected."""
    rng = random.Random(seed)
    return [
        Pair(
            format_prompt(ex.instruction, ex.input),
            ex.response + END,
            _wrong_answer(ex, rng) + END,
        )
        for ex in examples
    ]


def encode_pairs(
    tok: CharTokenizer, pairs: list[Pair]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """ids and answer masks of the chosen and of the rejected sequences, each (B, L) padded
    with the end token (mask False there): ids_w, mask_w, ids_l, mask_l."""

    def stack(answers):
        seqs = [(tok.encode(p.prompt + a), len(p.prompt)) for p, a in zip(pairs, answers)]
        L = max(len(s) for s, _ in seqs)
        ids = torch.full((len(seqs), L), tok.stoi[END], dtype=torch.long)  # (B, L)
        mask = torch.zeros(len(seqs), L, dtype=torch.bool)  # (B, L)
        for i, (s, n) in enumerate(seqs):
            ids[i, : len(s)] = s
            mask[i, n : len(s)] = True
        return ids, mask

    ids_w, mask_w = stack([p.chosen for p in pairs])
    ids_l, mask_l = stack([p.rejected for p in pairs])
    return ids_w, mask_w, ids_l, mask_l


def dpo_train(
    policy,
    tok: CharTokenizer,
    pairs: list[Pair],
    beta: float,
    steps: int,
    lr: float = 1e-4,
    batch_size: int = 16,
    seed: int = 0,
):
    """Train ``policy`` in place with the DPO loss against a frozen copy of itself (the
    reference, taken before the first step). Returns (reference, list of the step losses)."""
    reference = copy.deepcopy(policy).eval().requires_grad_(False)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(policy.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    policy.train()
    for _ in range(steps):
        pick = torch.randint(len(pairs), (batch_size,), generator=g).tolist()
        ids_w, mask_w, ids_l, mask_l = encode_pairs(tok, [pairs[i] for i in pick])
        with torch.no_grad():
            ref_w = completion_logprobs(reference, ids_w, mask_w)  # (B,)
            ref_l = completion_logprobs(reference, ids_l, mask_l)  # (B,)
        pi_w = completion_logprobs(policy, ids_w, mask_w)  # (B,)
        pi_l = completion_logprobs(policy, ids_l, mask_l)  # (B,)
        loss, _, _ = dpo_loss(pi_w, pi_l, ref_w, ref_l, beta)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    policy.eval()
    return reference, losses


@torch.no_grad()
def token_kl(policy, reference, ids: torch.Tensor, mask: torch.Tensor) -> float:
    """Mean over the masked positions of KL(π(·|context) || π_ref(·|context)), in nats per
    token: how far the policy's next-token distributions moved, where the answers are
    written. ids, mask (B, T) as for ``completion_logprobs``."""
    lp = F.log_softmax(policy(ids[:, :-1])[0].double(), dim=-1)  # (B, T-1, V)
    lq = F.log_softmax(reference(ids[:, :-1])[0].double(), dim=-1)  # (B, T-1, V)
    kl = (lp.exp() * (lp - lq)).sum(-1)  # (B, T-1)
    m = mask[:, 1:]  # (B, T-1): the positions that predict an answer token
    return float(kl[m].mean())


@torch.no_grad()
def preference_metrics(policy, reference, tok: CharTokenizer, pairs: list[Pair], beta: float):
    """{accuracy: share of pairs whose chosen answer gets the larger implicit reward, margin:
    mean reward(chosen) - reward(rejected), chosen_logratio and rejected_logratio: mean
    log π/π_ref of each, kl: ``token_kl`` on the chosen answers}."""
    ids_w, mask_w, ids_l, mask_l = encode_pairs(tok, pairs)
    policy.eval()
    pw, pl = completion_logprobs(policy, ids_w, mask_w), completion_logprobs(policy, ids_l, mask_l)
    rw = completion_logprobs(reference, ids_w, mask_w)
    rl = completion_logprobs(reference, ids_l, mask_l)
    _, reward_w, reward_l = dpo_loss(pw.double(), pl.double(), rw.double(), rl.double(), beta)
    return {
        "accuracy": float((reward_w > reward_l).double().mean()),
        "margin": float((reward_w - reward_l).mean()),
        "chosen_logratio": float((pw - rw).double().mean()),
        "rejected_logratio": float((pl - rl).double().mean()),
        "kl": token_kl(policy, reference, ids_w, mask_w),
    }
