"""Training, decoding and scoring for ``course_lib.seq2seq``: ``train`` (teacher forcing,
seeded), greedy and beam search, GNMT's length normalisation, exact match, corpus BLEU, and
errors sorted by kind.

Beam search keeps the ``beam_size`` most likely unfinished prefixes (by summed log-probability)
at every step; a prefix that emits <eos> (or reaches ``max_len`` tokens) is finished and scored
by log P(Y | X) / lp(Y), with lp(Y) = ((5 + |Y|) / 6)^alpha (Wu et al. 2016, GNMT; |Y| counts
the generated tokens, <eos> included). It stops once no unfinished prefix can beat the best
finished one, so with a beam as wide as every possible prefix it is exhaustive search
(``tests/labs/test_seq2seq.py`` checks it against brute force). BLEU (Papineni et al. 2002) is
sacrebleu's ``corpus_bleu`` without smoothing, on our word tokens (the tests check the two agree).
"""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from ..schedule import noam_factor, noam_rate, warmup_cosine
from .seq2seq import BOS, EOS, PAD, Seq2Seq, Seq2SeqConfig, TranslationData, pad_rows, words

__all__ = [
    "TrainSettings",
    "train",
    "next_log_probs",
    "greedy_decode",
    "length_penalty",
    "beam_search",
    "exhaustive_search",
    "translate",
    "exact_match",
    "corpus_bleu",
    "error_kind",
    "evaluate",
]


SCHEDULES = ("cosine", "noam", "noam-without-warmup")


@dataclass
class TrainSettings:
    """How ``train`` trains: AdamW, linear warmup then cosine decay to lr / 10 over ``steps``,
    batches of ``batch_size`` pairs drawn with replacement by a generator seeded with ``seed``;
    the validation loss every ``eval_every`` steps (and at the end).

    The original transformer's recipe (``course_lib.original``): ``schedule="noam"``, the
    paper's warm-up then 1 / √step decay (``course_lib.schedule.noam_rate``), scaled to peak at
    ``lr`` after ``warmup`` steps ("noam-without-warmup": the same at ``lr`` from step 1), and
    ``label_smoothing`` ε (0.1 in the paper) in the training loss."""

    steps: int = 500
    batch_size: int = 64
    lr: float = 3e-3
    warmup: int = 50
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    eval_every: int = 100
    seed: int = 0
    schedule: str = "cosine"
    label_smoothing: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    def lr_at(self, step: int, d_model: int) -> float:
        """The learning rate of 0-based ``step`` under ``schedule``."""
        if self.schedule == "cosine":
            return warmup_cosine(step, self.lr, self.warmup, self.steps, min_lr=self.lr / 10)
        if self.schedule in ("noam", "noam-without-warmup"):
            factor = noam_factor(self.lr, d_model, max(self.warmup, 1))
            return noam_rate(
                step + 1, d_model, max(self.warmup, 1), factor, self.schedule == "noam"
            )
        raise ValueError(
            f"TrainSettings: schedule must be one of {SCHEDULES}; got {self.schedule!r}."
        )


def _trim(src: torch.Tensor, tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop the columns that are <pad> in every row (a batch is only as wide as its longest
    pair)."""
    s = int((src != PAD).sum(1).max())
    t = int((tgt != PAD).sum(1).max())
    return src[:, :s], tgt[:, :t]


@torch.no_grad()
def _loss_on(model: Seq2Seq, src: torch.Tensor, tgt: torch.Tensor, batch: int = 1000) -> float:
    """Mean per-token cross-entropy over a whole split (token-weighted, pads left out)."""
    was_training = model.training
    model.eval()
    total, n = 0.0, 0
    for i in range(0, len(src), batch):
        s, t = _trim(src[i : i + batch], tgt[i : i + batch])
        logits, _ = model(s, t[:, :-1])  # (b, T, V)
        y = t[:, 1:]
        total += float(
            F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]),
                y.reshape(-1),
                ignore_index=PAD,
                reduction="sum",
            )
        )
        n += int((y != PAD).sum())
    model.train(was_training)
    return total / n


def train(
    data: TranslationData,
    cfg: Seq2SeqConfig | None = None,
    settings: TrainSettings | None = None,
    progress: bool = False,
    snapshots: tuple[int, ...] = (),
    build=Seq2Seq,
) -> tuple[Seq2Seq, dict]:
    """Train a ``Seq2Seq`` on ``data``'s training pairs with teacher forcing; returns
    ``(model (eval mode), history)``.

    ``cfg`` defaults to ``Seq2SeqConfig`` sized for ``data``'s vocabularies and lengths. The
    same data, config and settings give the same weights (everything is seeded; run on the
    same number of threads for bit-equal floats). ``history``: ``step``, ``train_loss``,
    ``lr`` and ``grad_norm`` (the gradient's norm before clipping; every step), ``val_step``
    and ``val_loss``, ``seconds`` (wall time of training,
    evaluation included), ``tokens`` (target tokens trained on), and ``snapshots``: {step: a copy
    of the weights after that many steps} for each step in ``snapshots`` (the same run seen part
    of the way through, at no extra training cost). ``build(cfg)`` makes the model
    (``Seq2Seq``; ``course_lib.original.OriginalSeq2Seq`` for the paper's).
    """
    if any(not 1 <= s <= (settings or TrainSettings()).steps for s in snapshots):
        raise ValueError(f"train: snapshot steps must lie in 1 .. steps; got {tuple(snapshots)}.")
    settings = settings or TrainSettings()
    if cfg is None:
        cfg = Seq2SeqConfig(
            len(data.src_vocab), len(data.tgt_vocab), data.max_src_len, data.max_tgt_len
        )
    if cfg.src_vocab < len(data.src_vocab) or cfg.tgt_vocab < len(data.tgt_vocab):
        raise ValueError(
            "train: the config's vocabularies are smaller than the data's; size the config from "
            "the data."
        )
    if settings.schedule not in SCHEDULES:
        raise ValueError(f"train: schedule must be one of {SCHEDULES}; got {settings.schedule!r}.")
    torch.manual_seed(settings.seed)  # the weights
    model = build(cfg)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]  # biases and LayerNorm gains
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": settings.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=settings.lr,
        betas=(0.9, 0.98),
    )
    src, tgt = data.tensors("train")
    val = data.tensors("val") if data.numbers["val"] else None
    g = torch.Generator().manual_seed(settings.seed + 1)  # the batches
    hist = {
        "step": [],
        "train_loss": [],
        "val_step": [],
        "val_loss": [],
        "lr": [],
        "grad_norm": [],
        "tokens": 0,
    }
    hist["snapshots"] = {}
    start = time.perf_counter()
    model.train()
    for step in range(settings.steps):
        lr = settings.lr_at(step, cfg.d_model)
        for group in opt.param_groups:
            group["lr"] = lr
        idx = torch.randint(len(src), (settings.batch_size,), generator=g)
        s, t = _trim(src[idx], tgt[idx])  # (b, S), (b, T + 1)
        logits, _ = model(s, t[:, :-1])  # (b, T, V): decoder input <bos> y_1 ..
        loss = F.cross_entropy(  # targets y_1 .. <eos>; pads don't count
            logits.reshape(-1, logits.shape[-1]),
            t[:, 1:].reshape(-1),
            ignore_index=PAD,
            label_smoothing=settings.label_smoothing,
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if settings.grad_clip:  # the norm before clipping
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), settings.grad_clip)
        else:
            grad_norm = torch.nn.utils.get_total_norm(
                [p.grad for p in model.parameters() if p.grad is not None]
            )
        opt.step()
        if step + 1 in snapshots:
            hist["snapshots"][step + 1] = {
                k: v.detach().clone() for k, v in model.state_dict().items()
            }
        hist["step"].append(step)
        hist["train_loss"].append(loss.item())
        hist["lr"].append(lr)
        hist["grad_norm"].append(float(grad_norm))
        hist["tokens"] += int((t[:, 1:] != PAD).sum())
        last = step == settings.steps - 1
        if val is not None and (
            last or (settings.eval_every and (step + 1) % settings.eval_every == 0)
        ):
            hist["val_step"].append(step + 1)
            hist["val_loss"].append(_loss_on(model, *val))
            if progress:
                print(
                    f"step {step + 1:5d}  train {hist['train_loss'][-1]:.4f}  val "
                    f"{hist['val_loss'][-1]:.4f}  "
                    f"{time.perf_counter() - start:.1f} s",
                    flush=True,
                )
    hist["seconds"] = time.perf_counter() - start
    return model.eval(), hist


# --------------------------------------------------------------------------- decoding
def next_log_probs(
    model: Seq2Seq, prefix: torch.Tensor, memory: torch.Tensor, keep: torch.Tensor
) -> torch.Tensor:
    """log P(next token | prefix, source) for prefix (N, t) (starting with <bos>), memory (N, S, d),
    keep (N, S) -> (N, V). <pad> and <bos> get probability 0: the decoder never writes them.

    The decoder is rerun on the whole prefix at every step: targets are at most ~20 tokens, so a
    KV cache (Chapter 10) would save little here.
    """
    logits = model.logits(
        model.decode(prefix, memory, keep)[:, -1]
    )  # (N, V): the last position only
    logits[:, [PAD, BOS]] = float("-inf")
    return torch.log_softmax(logits, dim=-1)  # (N, V)


def _strip(row: torch.Tensor) -> list[int]:
    """Ids after <bos> up to (not including) <eos>."""
    out = []
    for i in row.tolist()[1:]:
        if i in (EOS, PAD):
            break
        out.append(i)
    return out


@torch.no_grad()
def greedy_decode(model: Seq2Seq, src: torch.Tensor, max_len: int | None = None) -> list[list[int]]:
    """The most likely next token at every step, for a batch src (B, S); stops at <eos> or after
    ``max_len`` tokens (default: what the target position table holds). Returns B lists of ids
    (no <bos>, no <eos>)."""
    model.eval()
    max_len = max_len or model.cfg.max_tgt_len - 1
    memory, keep = model.encode(src)  # (B, S, d), (B, S)
    seq = torch.full((src.shape[0], 1), BOS, dtype=torch.long)  # (B, 1)
    done = torch.zeros(src.shape[0], dtype=torch.bool)
    for _ in range(max_len):
        nxt = next_log_probs(model, seq, memory, keep).argmax(-1)  # (B,)
        nxt = torch.where(done, torch.full_like(nxt, PAD), nxt)  # finished rows only pad
        seq = torch.cat([seq, nxt[:, None]], dim=1)  # (B, t + 1)
        done |= nxt == EOS
        if done.all():
            break
    return [_strip(r) for r in seq]


def length_penalty(length, alpha: float):
    """GNMT's lp(Y) = ((5 + |Y|) / 6)^alpha (Wu et al. 2016, eq. 14). alpha = 0: no
    normalisation (raw log-probability, which favours short outputs); alpha = 1: roughly the
    per-token average. ``length``: a number or a tensor."""
    if alpha < 0:
        raise ValueError(f"length_penalty: alpha must be >= 0; got {alpha}.")
    return ((5 + length) / 6) ** alpha


@torch.no_grad()
def beam_search(
    model: Seq2Seq,
    src: torch.Tensor,
    beam_size: int = 4,
    alpha: float = 0.6,
    max_len: int | None = None,
) -> tuple[list[list[int]], torch.Tensor]:
    """Beam search with length normalisation for a batch src (B, S).

    Returns (B lists of ids without <bos>/<eos>, scores (B,)): each the finished hypothesis Y
    with the highest log P(Y | X) / lp(Y). A hypothesis finishes when it emits <eos> or has
    ``max_len`` tokens (default: what the target position table holds).
    """
    if beam_size < 1:
        raise ValueError(f"beam_search: beam_size must be >= 1; got {beam_size}.")
    model.eval()
    max_len = max_len or model.cfg.max_tgt_len - 1
    B, K = src.shape[0], beam_size
    memory, keep = model.encode(src)  # (B, S, d), (B, S)
    memory = memory.repeat_interleave(K, dim=0)  # (B K, S, d): one copy per beam
    keep = keep.repeat_interleave(K, dim=0)  # (B K, S)
    seq = torch.full((B, K, 1), BOS, dtype=torch.long)  # (B, K, t)
    score = torch.full((B, K), float("-inf"))
    score[:, 0] = (
        0.0  # one live prefix (<bos>) to start: K copies would fill the beam with duplicates
    )
    best = torch.full((B,), float("-inf"))  # best finished normalised score so far
    best_seq = torch.full((B, max_len + 1), PAD, dtype=torch.long)
    bound = length_penalty(max_len, alpha)
    for t in range(1, max_len + 1):  # t = number of generated tokens after this step
        logp = next_log_probs(model, seq.view(B * K, t), memory, keep).view(B, K, -1)  # (B, K, V)
        cand = score[..., None] + logp  # (B, K, V): log P of every one-token extension
        V = cand.shape[-1]
        # finished hypotheses: every prefix + <eos>, and at the last step every extension
        fin = cand[..., EOS : EOS + 1] if t < max_len else cand  # (B, K, 1) or (B, K, V)
        fin_best, fin_arg = (fin / length_penalty(t, alpha)).flatten(1).max(-1)  # (B,)
        better = fin_best > best
        if better.any():
            k, tok = fin_arg // fin.shape[-1], fin_arg % fin.shape[-1]
            tok = tok if t == max_len else torch.full_like(tok, EOS)
            rows = torch.cat([seq[torch.arange(B), k], tok[:, None]], dim=1)  # (B, t + 1)
            best = torch.where(better, fin_best, best)
            best_seq[better, : t + 1] = rows[better]
        if t == max_len:
            break
        cand[..., EOS] = float("-inf")  # <eos> extensions are finished, not live
        score, flat = cand.flatten(1).topk(K, dim=-1)  # (B, K): the K most likely live prefixes
        parent, tok = flat // V, flat % V  # (B, K)
        seq = torch.cat(
            [seq.gather(1, parent[..., None].expand(-1, -1, t)), tok[..., None]], dim=2
        )  # (B, K, t + 1)
        # a live prefix's log P only falls and lp grows at most to lp(max_len): its best final
        # score is score / lp(max_len) (score <= 0). Stop once no prefix can beat the best finished.
        if (best >= score.max(-1).values / bound).all():
            break
    return [_strip(r) for r in best_seq], best


@torch.no_grad()
def exhaustive_search(
    model: Seq2Seq, src: torch.Tensor, alpha: float = 0.6, max_len: int = 3, limit: int = 20_000
) -> tuple[list[list[int]], torch.Tensor]:
    """The exact answer beam search approximates, by brute force, for a tiny target vocabulary.

    Scores every possible output of a batch src (B, S): every sequence of the W = V_tgt - 3 words
    of at most ``max_len - 1`` words followed by <eos>, and every sequence of exactly ``max_len``
    words (finished by the length limit, as in ``beam_search``), by log P(Y | X) / lp(Y) in one
    teacher-forced pass each. Returns (B lists of ids without <eos>, their scores (B,)), the
    same form as ``beam_search``. There are W^0 + ... + W^max_len candidates, so this refuses
    more than ``limit`` of them.
    """
    words_ = range(EOS + 1, model.cfg.tgt_vocab)  # every id but <pad>, <bos>, <eos>
    n = sum(len(words_) ** k for k in range(max_len + 1))
    if n > limit or max_len < 1:
        raise ValueError(
            f"exhaustive_search: {n} candidate outputs for {len(words_)} words and max_len "
            f"{max_len}; it is meant for tiny vocabularies (at most {limit} candidates, max_len "
            ">= 1). Use beam_search for a real model."
        )
    model.eval()
    cands = [list(c) + [EOS] for k in range(max_len) for c in itertools.product(words_, repeat=k)]
    cands += [list(c) for c in itertools.product(words_, repeat=max_len)]
    tgt = torch.full((len(cands), max_len + 1), PAD, dtype=torch.long)  # (N, max_len + 1)
    for i, c in enumerate(cands):
        tgt[i, : len(c) + 1] = torch.tensor([BOS, *c])
    y = tgt[:, 1:]  # (N, max_len): what each position must predict
    lp = length_penalty((y != PAD).sum(-1).float(), alpha)  # (N,): <eos> counts as a token
    memory, keep = model.encode(src)  # (B, S, d), (B, S)
    out, scores = [], []
    for b in range(src.shape[0]):
        h = model.decode(
            tgt[:, :-1],
            memory[b : b + 1].expand(len(cands), -1, -1),
            keep[b : b + 1].expand(len(cands), -1),
        )  # (N, max_len, d)
        logits = model.logits(h)  # (N, max_len, V)
        logits[..., [PAD, BOS]] = float("-inf")  # as in next_log_probs: never written
        logp = torch.log_softmax(logits, -1).gather(-1, y[..., None])[..., 0]  # (N, max_len)
        total = logp.masked_fill(y == PAD, 0.0).sum(-1) / lp  # (N,)
        i = int(total.argmax())
        out.append([t for t in cands[i] if t != EOS])
        scores.append(total[i])
    return out, torch.stack(scores)


@torch.no_grad()
def translate(
    model: Seq2Seq,
    data: TranslationData,
    texts: list[str],
    method: str = "greedy",
    batch: int = 500,
    **options,
) -> list[str]:
    """English number words -> French ones, ``method`` "greedy" or "beam" (``options``:
    beam_size, alpha, max_len)."""
    if method not in ("greedy", "beam"):
        raise ValueError(f"translate: method must be 'greedy' or 'beam'; got {method!r}.")
    out = []
    for i in range(0, len(texts), batch):
        rows = [data.src_vocab.encode(t) for t in texts[i : i + batch]]
        src = pad_rows(rows, max(len(r) for r in rows))  # (b, S)
        ids = (
            greedy_decode(model, src, **options)
            if method == "greedy"
            else beam_search(model, src, **options)[0]
        )
        out += [data.tgt_vocab.decode(r) for r in ids]
    return out


# --------------------------------------------------------------------------- metrics
def exact_match(hyps: list[str], refs: list[str]) -> float:
    """The fraction of hypotheses identical to their reference."""
    if len(hyps) != len(refs) or not refs:
        raise ValueError(
            f"exact_match: need as many hypotheses as references (and at least one); "
            f"got {len(hyps)} and {len(refs)}."
        )
    return sum(h == r for h, r in zip(hyps, refs)) / len(refs)


def _ngrams(tokens: list[str], n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def corpus_bleu(hyps: list[list[str]], refs: list[list[str]], max_n: int = 4) -> dict:
    """Corpus BLEU (Papineni et al. 2002) of tokenised hypotheses against one tokenised reference
    each, on a 0-100 scale like sacrebleu.

    p_n = (sum over sentences of n-gram matches, each n-gram counted at most as often as the
    reference has it: clipping) / (n-grams in the hypotheses); BP = exp(1 - r / c) when the
    hypotheses' total length c is below the references' r, else 1;
    BLEU = 100 BP exp(mean_n log p_n). No smoothing: BLEU is 0 when some p_n is 0.
    Returns {"bleu", "precisions" (in %), "bp", "sys_len", "ref_len"}.
    """
    if len(hyps) != len(refs) or not refs:
        raise ValueError(
            f"corpus_bleu: need one reference per hypothesis; got {len(hyps)} and {len(refs)}."
        )
    match, total = [0] * max_n, [0] * max_n
    for h, r in zip(hyps, refs):
        for n in range(1, max_n + 1):
            hc, rc = _ngrams(h, n), _ngrams(r, n)
            match[n - 1] += sum(
                min(c, rc[g]) for g, c in hc.items()
            )  # clipped: no credit for repeats
            total[n - 1] += max(len(h) - n + 1, 0)
    c, r = sum(len(h) for h in hyps), sum(len(x) for x in refs)
    precisions = [100.0 * m / t if t else 0.0 for m, t in zip(match, total)]
    bp = 1.0 if c > r else (math.exp(1 - r / c) if c else 0.0)
    if min(match) == 0:
        return {"bleu": 0.0, "precisions": precisions, "bp": bp, "sys_len": c, "ref_len": r}
    log_p = sum(math.log(m / t) for m, t in zip(match, total)) / max_n
    return {
        "bleu": 100.0 * bp * math.exp(log_p),
        "precisions": precisions,
        "bp": bp,
        "sys_len": c,
        "ref_len": r,
    }


def error_kind(hyp: str, ref: str) -> str | None:
    """What kind of mistake a French hypothesis makes (None when it is right):

    - "agreement": right but for a plural s (cent/cents, vingt/vingts);
    - "et": right but for a missing or extra "et" (vingt et un, not vingt-un);
    - "mille": one has "mille" and the other has not (the thousands are lost or invented);
    - "thousands": only the words before "mille" are wrong;
    - "hundreds": only the words after "mille" are wrong (or, in a number below 1000, any);
    - "both": the words before and after "mille" are wrong.
    """
    if hyp == ref:
        return None
    h, r = words(hyp), words(ref)

    def unplural(ws):
        return [w[:-1] if w in ("cents", "vingts") else w for w in ws]

    if unplural(h) == unplural(r):
        return "agreement"
    if [w for w in h if w not in ("et", "-")] == [w for w in r if w not in ("et", "-")]:
        return "et"
    if ("mille" in h) != ("mille" in r):
        return "mille"
    if "mille" not in r:
        return "hundreds"
    hi, ri = h.index("mille"), r.index("mille")
    head_ok, tail_ok = h[:hi] == r[:ri], h[hi + 1 :] == r[ri + 1 :]
    return "hundreds" if head_ok else ("thousands" if tail_ok else "both")


def evaluate(
    model: Seq2Seq,
    data: TranslationData,
    split: str = "test",
    beam_size: int = 4,
    alpha: float = 0.6,
) -> dict:
    """Greedy and beam translations of a split, with exact match, BLEU (on word tokens) and the
    errors counted by kind. Returns a dict of floats, counts and the translations."""
    refs = data.tgt[split]
    out = {"n": len(refs)}
    for method, opts in (("greedy", {}), ("beam", {"beam_size": beam_size, "alpha": alpha})):
        hyps = translate(model, data, data.src[split], method, **opts)
        out[f"exact_{method}"] = exact_match(hyps, refs)
        out[f"bleu_{method}"] = corpus_bleu([words(h) for h in hyps], [words(r) for r in refs])[
            "bleu"
        ]
        out[f"errors_{method}"] = dict(
            Counter(k for h, r in zip(hyps, refs) if (k := error_kind(h, r)))
        )
        out[f"hyps_{method}"] = hyps
    return out
