"""Decoding: turning a language model's next-token logits into text.

Pure functions on logits (B, V), in the order Hugging Face's ``generate`` applies them
(``RepetitionPenaltyLogitsProcessor``, then the ``Temperature``, ``TopK`` and ``TopP``
warpers), with the same semantics:

- ``apply_repetition_penalty(logits, prev_ids, penalty)``: every token that occurs in
  ``prev_ids`` (once or many times) has its logit divided by ``penalty`` if positive and
  multiplied by it if negative (Keskar et al. 2019), so it becomes less likely for penalty > 1.
- ``apply_temperature(logits, t)``: logits / t (t < 1 sharpens, t > 1 flattens).
- ``top_k_filter(logits, k)``: every logit below the k-th largest becomes -inf (ties with
  the k-th are kept).
- ``top_p_filter(logits, p)``: nucleus sampling (Holtzman et al. 2020). Keep the smallest set
  of most likely tokens whose probabilities add up to at least p (the token that crosses p is
  kept); at least ``min_keep`` tokens survive; the rest become -inf.
- ``sample_next``: all of the above, then softmax and one draw (or the argmax for
  temperature 0: greedy decoding).

``generate(model, idx, n, ...)`` runs the loop, with or without a KV cache, and crops the
context to the model's ``block_size``. Measures of what came out: ``distinct_n`` (the share
of n-grams that are distinct: repetition lowers it) and ``sequence_log_likelihood`` (the
model's own log-probability of its text).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = [
    "apply_repetition_penalty",
    "apply_temperature",
    "top_k_filter",
    "top_p_filter",
    "sample_next",
    "generate",
    "distinct_n",
    "longest_repeat",
    "sequence_log_likelihood",
]


def _check_logits(logits: torch.Tensor, name: str) -> None:
    if logits.dim() != 2:
        raise ValueError(
            f"{name}: logits must be (B, V), one row of next-token logits per sequence; "
            f"got shape {tuple(logits.shape)}. Use logits[:, -1, :] for a model's (B, T, V) output."
        )


def apply_repetition_penalty(
    logits: torch.Tensor, prev_ids: torch.Tensor, penalty: float
) -> torch.Tensor:
    """Make the tokens already present in ``prev_ids`` less likely (penalty > 1).

    Shapes: logits (B, V), prev_ids (B, T) int64 -> (B, V). A token's logit s becomes s / penalty
    when s > 0 and s * penalty when s <= 0 (both move it down), however often it occurred;
    other logits are unchanged. penalty = 1 changes nothing.
    """
    _check_logits(logits, "apply_repetition_penalty")
    if penalty <= 0:
        raise ValueError(
            f"apply_repetition_penalty: penalty must be > 0 (1 = no penalty); got {penalty}."
        )
    if prev_ids.dim() != 2 or prev_ids.shape[0] != logits.shape[0]:
        raise ValueError(
            f"apply_repetition_penalty: prev_ids must be (B, T) with B={logits.shape[0]}; "
            f"got shape {tuple(prev_ids.shape)}."
        )
    seen = torch.gather(logits, 1, prev_ids)  # (B, T): the logits of the tokens already there
    seen = torch.where(seen > 0, seen / penalty, seen * penalty)
    return logits.scatter(1, prev_ids, seen)  # (B, V); a repeated token gets the same value twice


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """logits / temperature: (B, V) -> (B, V). temperature must be > 0 (0 is greedy: use argmax)."""
    if temperature <= 0:
        raise ValueError(
            f"apply_temperature: temperature must be > 0; got {temperature} (for 0, take the "
            "argmax)."
        )
    return logits / temperature


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest logits of each row; the others become -inf. (B, V) -> (B, V).

    Logits equal to the k-th largest are kept too (as in Hugging Face's ``TopKLogitsWarper``).
    """
    _check_logits(logits, "top_k_filter")
    if not 1 <= int(k) <= logits.shape[-1]:
        raise ValueError(f"top_k_filter: k must lie in [1, {logits.shape[-1]}]; got {k}.")
    kth = torch.topk(logits, int(k), dim=-1).values[:, -1:]  # (B, 1): the k-th largest
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float, min_keep: int = 1) -> torch.Tensor:
    """Nucleus filtering: keep the smallest set of most likely tokens with total probability >= p.

    Shapes: (B, V) -> (B, V), filtered logits set to -inf. Sorting the probabilities in
    decreasing order, a token is kept when the probability of the tokens before it is still
    below p (so the token that crosses p stays); at least ``min_keep`` tokens always stay.
    p = 1 keeps every token. Equal probabilities are ordered as ``torch.sort`` orders them.
    """
    _check_logits(logits, "top_p_filter")
    if not 0.0 < p <= 1.0:
        raise ValueError(f"top_p_filter: p must lie in (0, 1]; got {p}.")
    if min_keep < 1:
        raise ValueError(f"top_p_filter: min_keep must be >= 1; got {min_keep}.")
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # (B, V) each
    probs = F.softmax(sorted_logits, dim=-1)  # (B, V), decreasing along each row
    before = probs.cumsum(dim=-1) - probs  # (B, V): the probability of the tokens ranked above
    drop_sorted = before >= p  # (B, V): p already reached without this token
    drop_sorted[:, :min_keep] = False
    drop = drop_sorted.scatter(1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def sample_next(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    repetition_penalty: float = 1.0,
    prev_ids: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """One next token per row from next-token logits (B, V); returns (B, 1) int64.

    Order (Hugging Face's): repetition penalty on ``prev_ids`` (B, T), then temperature
    (0 = greedy: the argmax, no randomness), top-k, top-p, softmax, one multinomial draw
    with ``generator``.
    """
    _check_logits(logits, "sample_next")
    if temperature < 0:
        raise ValueError(f"sample_next: temperature must be >= 0 (0 = greedy); got {temperature}.")
    if top_k is not None and not 1 <= top_k <= logits.shape[-1]:
        raise ValueError(
            f"sample_next: top_k must lie in [1, {logits.shape[-1]}] or be None; got {top_k}."
        )
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise ValueError(f"sample_next: top_p must lie in (0, 1] or be None; got {top_p}.")
    if repetition_penalty != 1.0:
        if prev_ids is None:
            raise ValueError(
                "sample_next: a repetition_penalty needs prev_ids, the tokens generated so far (B, "
                "T)."
            )
        logits = apply_repetition_penalty(logits, prev_ids, repetition_penalty)
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)  # (B, 1)
    logits = logits / temperature
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None and top_p < 1.0:
        logits = top_p_filter(logits, top_p)
    probs = F.softmax(logits, dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator)  # (B, 1)


@torch.no_grad()
def generate(
    model,
    idx: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    repetition_penalty: float = 1.0,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    return_logits: bool = False,
):
    """Continue idx (B, T) by ``max_new_tokens`` tokens from ``model`` (a MiniGPT).

    Returns (B, T + max_new_tokens) int64, and with ``return_logits`` also the list of the
    max_new_tokens next-token logits (B, V) that were sampled from (before any filtering).

    Without a cache every step runs the model on the whole context (the last block_size
    tokens). With ``use_cache`` the prompt is run once and every later step runs only the new
    token, reading the earlier keys and values from a ``KVCache``. Past block_size the
    context is cropped to the last block_size tokens and every step recomputes the window,
    with or without a cache: dropping the oldest cached key would not give the cropped
    context's keys, because from the second layer on every cached key was computed with the
    dropped tokens in view (and with learned positions every position of the window shifts).
    So cached and uncached generation give the same logits, to float rounding, at every step.
    All new tensors are created on ``idx.device``; the model is left in the mode it was in.
    """
    if max_new_tokens < 0:
        raise ValueError(f"generate: max_new_tokens must be >= 0; got {max_new_tokens}.")
    if idx.dim() != 2 or idx.shape[1] < 1:
        raise ValueError(
            f"generate: idx must be (B, T) token ids with T >= 1; got shape {tuple(idx.shape)}."
        )
    block = model.cfg.block_size
    was_training = model.training
    model.eval()
    cache = model.new_cache() if use_cache else None
    all_logits = []
    try:
        for step in range(max_new_tokens):
            if cache is None:
                logits = model(idx[:, -block:])[0][:, -1, :]  # (B, V): the whole window, every step
            elif step == 0:
                # the prompt fills the cache
                logits = model(idx[:, -block:], cache=cache)[0][:, -1, :]
            elif len(cache) < block:
                logits = model(idx[:, -1:], cache=cache)[0][:, -1, :]  # only the new token
            else:
                # The window is full and slides from now on. The cached keys and values of the
                # window's tokens were computed with the dropped tokens in view (in every layer
                # after the first), so they are not those of the cropped context: recompute.
                cache = None
                logits = model(idx[:, -block:])[0][:, -1, :]
            if return_logits:
                all_logits.append(logits)
            nxt = sample_next(
                logits,
                temperature,
                top_k,
                top_p,
                repetition_penalty,
                prev_ids=idx,
                generator=generator,
            )  # (B, 1)
            idx = torch.cat([idx, nxt.to(idx.device)], dim=1)  # (B, T + step + 1)
    finally:
        model.train(was_training)
    return (idx, all_logits) if return_logits else idx


def distinct_n(ids, n: int = 2) -> float:
    """The share of distinct n-grams among all n-grams of a sequence (Li et al. 2016):
    1.0 when nothing repeats, small for text that loops. ids: a 1-D sequence of token ids (a
    tensor or a list), or of any hashable items such as words."""
    ids = ids.tolist() if torch.is_tensor(ids) else list(ids)
    if n < 1:
        raise ValueError(f"distinct_n: n must be >= 1; got {n}.")
    grams = [tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)]
    if not grams:
        raise ValueError(f"distinct_n: the sequence ({len(ids)} tokens) is shorter than n={n}.")
    return len(set(grams)) / len(grams)


def longest_repeat(seq) -> int:
    """The length of the longest stretch that occurs at least twice in ``seq`` (a string, or a
    1-D sequence of ids), the two occurrences allowed to overlap: how much of itself a
    looping text repeats ("abcabc" repeats "abc", 3; "abcd" nothing, 0)."""
    items = seq.tolist() if torch.is_tensor(seq) else list(seq)
    best = 0
    for shift in range(1, len(items)):  # compare the sequence with itself moved by `shift`
        run = 0
        for a, b in zip(items, items[shift:]):
            run = run + 1 if a == b else 0
            best = max(best, run)
    return best


@torch.no_grad()
def sequence_log_likelihood(model, ids: torch.Tensor, start: int) -> float:
    """The model's mean log-probability (nats per token) of tokens ids[:, start:], each given
    the (at most block_size) tokens before it: the context the model had when it wrote it.

    ids: (1, T) with 1 <= start < T. Higher means the text is more typical of the model;
    greedy text scores highest. One batched forward pass: the first block_size positions
    come from one window, every later token from its own window of the previous block_size.
    """
    if ids.dim() != 2 or ids.shape[0] != 1:
        raise ValueError(
            f"sequence_log_likelihood: ids must be (1, T); got shape {tuple(ids.shape)}."
        )
    T = ids.shape[1]
    if not 1 <= start < T:
        raise ValueError(f"sequence_log_likelihood: start must lie in [1, {T - 1}]; got {start}.")
    block = model.cfg.block_size
    was_training = model.training
    model.eval()
    head = ids[:, : min(T, block)]  # (1, <= block): tokens 1 .. block - 1 are predicted inside it
    # (n - 1, V): row t - 1 predicts token t
    logp = F.log_softmax(model(head)[0][0, :-1].double(), dim=-1)
    scores = [logp[t - 1, ids[0, t]] for t in range(start, head.shape[1])]
    if T > block:
        # (T - block, block): window j ends just before token j + block
        windows = ids[0].unfold(0, block, 1)[: T - block]
        last = F.log_softmax(model(windows)[0][:, -1].double(), dim=-1)  # (T - block, V)
        targets = ids[0, block:]  # (T - block,)
        picked = last.gather(1, targets[:, None])[:, 0]  # (T - block,)
        first = max(0, start - block)
        scores += list(picked[first:])
    model.train(was_training)
    return float(torch.stack(scores).mean())
