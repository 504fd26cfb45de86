"""Chapter 12's experiments: a downstream task, and ways to adapt a pretrained model to it.

The task: **which play is this passage from?** The passages are 64-character windows of the
three plays that lie entirely in the validation part of the corpus (the last 10 %), so the
pretrained model (``course_lib.checkpoint.load_pretrained``) never read them: Twelfth Night, The Two
Gentlemen of Verona, The Winter's Tale. Speaker headings (``VIOLA.``), stage directions and
act/scene lines are removed first, so a passage must be recognised from what is said, not
from who says it. Windows from the first 80 % of each play are the training pool, the last
20 % the test set (later scenes: no test window overlaps a training one).

``PlayClassifier`` puts a linear head on a MiniGPT body (the final vector of the last
position); ``finetune`` trains it in one of four modes: ``full`` (every weight), ``probe``
(the body frozen, only the head: a linear probe), ``lora`` (the body frozen, low-rank adapters
on the attention projections plus the head) and ``scratch`` (full training from a random
initialisation, the control).
"""

from __future__ import annotations

import copy
import re
import time
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..corpus import PLAY_SEPARATOR, load_corpus
from ..data import CharTokenizer
from ..model import MiniGPT
from .lora import add_lora, count_trainable

__all__ = [
    "TASK_PLAYS",
    "FT_SETTINGS",
    "CLASSES",
    "PlayData",
    "clean_play",
    "play_texts",
    "shuffle_words",
    "play_data",
    "PlayClassifier",
    "FinetuneResult",
    "finetune",
    "evaluate",
    "ngram_baseline",
    "mean_lm_loss",
    "zero_shot",
]

#: The three plays entirely inside the validation part of the corpus (never pretrained on).
TASK_PLAYS = ("TWELFTH NIGHT", "THE TWO GENTLEMEN OF VERONA", "THE WINTER'S TALE")
#: Fine-tuning recipe shared by every mode (AdamW, warm-up then cosine; lr per mode).
FT_SETTINGS = {
    "steps": 150,
    "batch_size": 32,
    "n_train_per_play": 100,
    "n_test_per_play": 200,
    "lr": {"full": 1e-4, "scratch": 1e-3, "probe": 1e-2, "lora": 3e-3},
    "weight_decay": 0.01,
}

# a speaker heading: "VIOLA." or "FIRST OFFICER."
_HEADING = re.compile(r"^[A-Z][A-Z0-9 .,'&-]*\.$")
_STAGE = re.compile(r"^\s*\[.*\]\s*$")  # a whole-line stage direction
_ACT = re.compile(r"^(ACT|SCENE|Scene|Act)\b")


def clean_play(text: str) -> str:
    """One play without its front matter, speaker headings, whole-line stage directions,
    act/scene lines and blank lines: the spoken lines, one per line."""
    start = re.search(r"^(ACT|Act) (I|1)\b", text, re.M)
    body = text[start.start() :] if start else text
    keep = [
        ln.strip()
        for ln in body.split("\n")
        if ln.strip()
        and not _HEADING.match(ln.strip())
        and not _STAGE.match(ln)
        and not _ACT.match(ln.strip())
    ]
    return "\n".join(keep)


def play_texts(plays: tuple[str, ...] = TASK_PLAYS) -> dict[str, str]:
    """{title: cleaned text} of the named plays (titles as their first line starts)."""
    found = {}
    for play in load_corpus().split(PLAY_SEPARATOR):
        title = play.split("\n", 1)[0]
        for name in plays:
            if title.startswith(name):
                found[name] = clean_play(play)
    missing = [p for p in plays if p not in found]
    if missing:
        raise ValueError(f"play_texts: no play in the corpus starts with {missing}.")
    return found


@dataclass
class PlayData:
    """Labelled passages: x (N, T) token ids, y (N,) labels (0 shuffled, 1 as written), the
    passages as text, and the class names."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    text_train: list
    text_test: list
    plays: tuple  # the class names (the attribute name is kept for the head's size)


CLASSES = ("shuffled", "as written")


def shuffle_words(passage: str, g: torch.Generator) -> str:
    """The same words (split at spaces; a line break stays inside its word) in a random
    different order, joined by single spaces: same characters, same length, no syntax."""
    words = passage.split(" ")
    if len(set(words)) < 2:
        raise ValueError("shuffle_words: the passage needs at least two different words.")
    while True:
        order = torch.randperm(len(words), generator=g).tolist()
        out = " ".join(words[i] for i in order)
        if out != passage:
            return out


def play_data(
    tok: CharTokenizer,
    block_size: int = 64,
    n_train_per_play: int | None = None,
    n_test_per_play: int | None = None,
    seed: int = 0,
) -> PlayData:
    """Non-overlapping ``block_size``-character windows of each task play: a seeded sample of
    ``n_train_per_play`` from the first 80 % of the play, ``n_test_per_play`` from the last 20 %.
    Half of each sample (chosen at random) has its words shuffled (label 0); the rest are as
    Shakespeare wrote them (label 1)."""
    s = FT_SETTINGS
    n_tr = s["n_train_per_play"] if n_train_per_play is None else n_train_per_play
    n_te = s["n_test_per_play"] if n_test_per_play is None else n_test_per_play
    g = torch.Generator().manual_seed(seed)
    parts = {k: [] for k in ("xtr", "ytr", "xte", "yte", "ttr", "tte")}
    for name, text in play_texts().items():
        windows = [
            text[i : i + block_size] for i in range(0, len(text) - block_size + 1, block_size)
        ]
        windows = [w for w in windows if len(set(w.split(" "))) >= 4]  # enough words to shuffle
        cut = int(0.8 * len(windows))
        train_pool, test_pool = windows[:cut], windows[cut:]
        if n_tr > len(train_pool) or n_te > len(test_pool):
            raise ValueError(
                f"play_data: {name} has {len(train_pool)} training and {len(test_pool)} test "
                "windows; "
                f"asked for {n_tr} and {n_te}."
            )
        for pool, n, xs, ys, ts in (
            (train_pool, n_tr, "xtr", "ytr", "ttr"),
            (test_pool, n_te, "xte", "yte", "tte"),
        ):
            pick = torch.randperm(len(pool), generator=g)[:n].tolist()
            labels = torch.randperm(n, generator=g) % 2  # exactly half shuffled (n even)
            for i, label in zip(pick, labels.tolist()):
                passage = pool[i] if label == 1 else shuffle_words(pool[i], g)
                parts[xs].append(tok.encode(passage))
                parts[ts].append(passage)
                parts[ys].append(label)
    return PlayData(
        torch.stack(parts["xtr"]),
        torch.tensor(parts["ytr"]),
        torch.stack(parts["xte"]),
        torch.tensor(parts["yte"]),
        parts["ttr"],
        parts["tte"],
        CLASSES,
    )


class PlayClassifier(nn.Module):
    """A MiniGPT body (embeddings, blocks, final LayerNorm; its LM head unused) and a linear
    head on the final vector of the last position, the only one that has read the whole
    passage through causal attention (as GPT-1 classifies): idx (B, T) -> logits (B, n_classes)."""

    def __init__(self, body: MiniGPT, n_classes: int):
        super().__init__()
        self.body = body
        self.head = nn.Linear(body.cfg.d_model, n_classes)

    def features(self, idx: torch.Tensor) -> torch.Tensor:
        """(B, T) ids -> (B, d): the body's final vector at the last position."""
        b = self.body
        x = b.tok_emb(idx)  # (B, T, d)
        x = b.pos_emb(x) if b.pos_emb is not None else x
        for block in b.blocks:
            x = block(x)  # (B, T, d)
        return b.ln_f(x[:, -1])  # (B, d)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(idx))  # (B, n_classes)


@dataclass
class FinetuneResult:
    mode: str
    rank: int | None
    accuracy: float  # on the test passages
    train_accuracy: float
    trainable: int  # parameters that were trained
    total: int  # all parameters of the classifier
    seconds: float
    losses: list

    def to_dict(self) -> dict:
        return asdict(self)


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 256) -> float:
    """Accuracy of ``model`` on passages x (N, T) with labels y (N,)."""
    was = model.training
    model.eval()
    right = sum(
        (model(x[i : i + batch]).argmax(-1) == y[i : i + batch]).sum().item()
        for i in range(0, len(x), batch)
    )
    model.train(was)
    return right / len(x)


def finetune(
    pretrained: MiniGPT,
    data: PlayData,
    mode: str,
    rank: int = 4,
    steps: int | None = None,
    seed: int = 0,
) -> tuple[PlayClassifier, FinetuneResult]:
    """Adapt a copy of ``pretrained`` to the play task. ``mode``: "full", "probe", "lora"
    (``rank``) or "scratch" (same architecture, re-initialised). Same data order, steps and
    schedule for every mode; only the learning rate (``FT_SETTINGS["lr"]``) differs."""
    s = FT_SETTINGS
    if mode not in s["lr"]:
        raise ValueError(f"finetune: mode must be one of {sorted(s['lr'])}; got {mode!r}.")
    steps = s["steps"] if steps is None else steps
    torch.manual_seed(seed)
    body = MiniGPT(pretrained.cfg) if mode == "scratch" else copy.deepcopy(pretrained)
    model = PlayClassifier(body, len(data.plays))
    nn.init.normal_(model.head.weight, std=0.02)
    nn.init.zeros_(model.head.bias)
    if mode == "probe":
        for p in model.body.parameters():
            p.requires_grad_(False)
    elif mode == "lora":
        add_lora(model, rank, targets=("attn.qkv", "attn.proj"), trainable=("head",))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=s["lr"][mode], weight_decay=s["weight_decay"])
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda t: (
            min(1.0, (t + 1) / warm)
            * 0.5
            * (1 + torch.cos(torch.tensor(torch.pi * t / steps)).item())
        ),
    )
    g = torch.Generator().manual_seed(seed)
    losses = []
    model.train()
    t0 = time.perf_counter()
    for _ in range(steps):
        idx = torch.randint(len(data.y_train), (s["batch_size"],), generator=g)
        loss = F.cross_entropy(model(data.x_train[idx]), data.y_train[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    seconds = time.perf_counter() - t0
    result = FinetuneResult(
        mode,
        rank if mode == "lora" else None,
        evaluate(model, data.x_test, data.y_test),
        evaluate(model, data.x_train, data.y_train),
        count_trainable(model),
        sum(p.numel() for p in model.parameters()),
        seconds,
        losses,
    )
    return model.eval(), result


def ngram_baseline(data: PlayData) -> float:
    """Test accuracy of logistic regression on character 1- to 4-gram TF-IDF features of the
    same labelled passages (scikit-learn): a strong classical baseline for short texts."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    vec = TfidfVectorizer(analyzer="char", ngram_range=(1, 4), sublinear_tf=True)
    xtr = vec.fit_transform(data.text_train)
    clf = LogisticRegression(max_iter=2000, C=10.0).fit(xtr, data.y_train.numpy())
    return float((clf.predict(vec.transform(data.text_test)) == data.y_test.numpy()).mean())


@torch.no_grad()
def mean_lm_loss(model: MiniGPT, x: torch.Tensor) -> torch.Tensor:
    """(N, T) ids -> (N,): the language model's mean next-character loss on each passage."""
    logits = model(x)[0]  # (N, T, V)
    nll = F.cross_entropy(logits[:, :-1].transpose(1, 2), x[:, 1:], reduction="none")  # (N, T - 1)
    return nll.mean(dim=1)


def zero_shot(model: MiniGPT, data: PlayData) -> dict:
    """The task without any training: call a passage "as written" when the pretrained model's
    loss on it is below the median loss of the training passages. Returns the test accuracy
    and the mean test loss of each class."""
    # (N,) each
    train_loss, test_loss = mean_lm_loss(model, data.x_train), mean_lm_loss(model, data.x_test)
    guess = (test_loss < train_loss.median()).long()  # 1 = as written
    return {
        "accuracy": (guess == data.y_test).float().mean().item(),
        "loss_as_written": test_loss[data.y_test == 1].mean().item(),
        "loss_shuffled": test_loss[data.y_test == 0].mean().item(),
    }
