"""Chapter 11's vision experiments: 8x8 digits, a vision transformer, a small CNN, a baseline.

The images are scikit-learn's ``load_digits`` (1,797 handwritten digits, 8x8 pixels, values
0-16; the data ships inside the scikit-learn package, so nothing is downloaded). ``digits_split``
is the one fixed, seeded, stratified train/test split every experiment uses.

``train_classifier`` trains any image classifier with AdamW and a one-cycle schedule and
reports its test accuracy and training time; ``data_hunger`` repeats that for growing training
sets (the benchmark ``benchmarks/vision_bench.py`` runs it and stores the table).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..encoder import ViT

__all__ = [
    "Digits",
    "digits_split",
    "SmallCNN",
    "VIT_SETTINGS",
    "make_vit",
    "TrainResult",
    "train_classifier",
    "accuracy",
    "logistic_baseline",
    "subset",
    "data_hunger",
]

#: The chapter's vision transformer and its training recipe (chosen by a small sweep).
VIT_SETTINGS = {
    "patch": 2,
    "n_layer": 2,
    "n_head": 4,
    "d_model": 64,
    "epochs": 40,
    "lr": 1e-3,
    "batch_size": 64,
    "weight_decay": 0.05,
}


@dataclass
class Digits:
    """Train and test images (N, 8, 8) float32 in [0, 1] and labels (N,) int64."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor


def digits_split(test_fraction: float = 0.2, seed: int = 0) -> Digits:
    """scikit-learn's 8x8 digits, split once by a seeded, stratified shuffle (the same split
    for every model, so their accuracies are comparable)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"digits_split: test_fraction must lie in (0, 1); got {test_fraction}.")
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)  # (1797, 8, 8): pixel values 0..16 -> 0..1
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, d.target, test_size=test_fraction, random_state=seed, stratify=d.target
    )
    t = torch.from_numpy
    return Digits(t(x_tr), t(y_tr).long(), t(x_te), t(y_te).long())


def subset(data: Digits, n: int, seed: int = 0) -> Digits:
    """The first ``n`` training images of a seeded, class-balanced order (test set unchanged)."""
    if not 10 <= n <= len(data.y_train):
        raise ValueError(f"subset: n must lie in [10, {len(data.y_train)}]; got {n}.")
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(data.y_train), generator=g)
    # round-robin over the classes, so even 10 images hold one of each digit
    by_class = [order[data.y_train[order] == c] for c in range(10)]
    picked = torch.stack(
        [cls[i] for i in range(max(len(c) for c in by_class)) for cls in by_class if i < len(cls)]
    )
    idx = picked[:n]
    return Digits(data.x_train[idx], data.y_train[idx], data.x_test, data.y_test)


class SmallCNN(nn.Module):
    """Two 3x3 convolutions (16 and 32 channels, ReLU, 2x2 max-pooling after each), then a linear
    layer: (B, 8, 8) -> (B, 10). Locality and translation equivariance are built in."""

    def __init__(self, n_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.head = nn.Linear(32 * 2 * 2, n_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images[:, None] if images.dim() == 3 else images  # (B, 1, 8, 8)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # (B, 16, 4, 4)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # (B, 32, 2, 2)
        return self.head(x.flatten(1))  # (B, 10)


def make_vit(seed: int = 0) -> ViT:
    """The chapter's ViT (``VIT_SETTINGS``), initialised from ``seed``."""
    torch.manual_seed(seed)
    s = VIT_SETTINGS
    return ViT(
        image_size=8,
        patch=s["patch"],
        n_layer=s["n_layer"],
        n_head=s["n_head"],
        d_model=s["d_model"],
    )


@dataclass
class TrainResult:
    accuracy: float  # on the test images
    train_accuracy: float
    seconds: float  # training time (wall clock)
    steps: int
    losses: list  # mean training loss of each epoch

    def to_dict(self) -> dict:
        return asdict(self)


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of images (N, 8, 8) whose most likely class is the label (N,)."""
    was = model.training
    model.eval()
    acc = (model(x).argmax(-1) == y).float().mean().item()
    model.train(was)
    return acc


def train_classifier(
    model: nn.Module,
    data: Digits,
    epochs: int = 40,
    lr: float = 1e-3,
    batch_size: int = 64,
    weight_decay: float = 0.05,
    seed: int = 0,
    min_steps: int = 0,
) -> TrainResult:
    """Train with AdamW, a one-cycle learning rate (10 % warm-up, cosine down) and cross-entropy;
    shuffled mini-batches from a seeded generator. ``min_steps`` raises the number of epochs
    for small training sets, so every size gets at least that many updates."""
    n = len(data.y_train)
    per_epoch = (n + batch_size - 1) // batch_size
    epochs = max(epochs, -(-min_steps // per_epoch))
    steps = epochs * per_epoch
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=steps, pct_start=0.1)
    losses = []
    model.train()
    t0 = time.perf_counter()
    for _ in range(epochs):
        order = torch.randperm(n, generator=g)
        total = 0.0
        for i in range(0, n, batch_size):
            idx = order[i : i + batch_size]
            loss = F.cross_entropy(model(data.x_train[idx]), data.y_train[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
        losses.append(total / n)
    seconds = time.perf_counter() - t0
    model.eval()
    return TrainResult(
        accuracy(model, data.x_test, data.y_test),
        accuracy(model, data.x_train, data.y_train),
        seconds,
        steps,
        losses,
    )


def logistic_baseline(data: Digits) -> tuple[float, float]:
    """Multinomial logistic regression on the 64 raw pixels (scikit-learn):
    returns (test accuracy, training seconds)."""
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits  # installed with scikit-learn

    t0 = time.perf_counter()
    # a 1437 x 64 problem: extra BLAS threads only fight over the cores
    with threadpool_limits(limits=1):
        clf = LogisticRegression(max_iter=2000).fit(
            data.x_train.reshape(len(data.x_train), -1).numpy(), data.y_train.numpy()
        )
    seconds = time.perf_counter() - t0
    acc = float(
        (
            clf.predict(data.x_test.reshape(len(data.x_test), -1).numpy()) == data.y_test.numpy()
        ).mean()
    )
    return acc, seconds


def data_hunger(
    sizes: list[int],
    seeds: list[int],
    data: Digits | None = None,
    min_steps: int = 300,
    progress: bool = False,
) -> list[dict]:
    """Test accuracy of the ViT, the small CNN and logistic regression trained on the first n
    images of ``subset`` for each n in ``sizes`` and each seed (the seed picks the subset and
    the initialisation). Returns one row per (model, n, seed)."""
    data = data or digits_split()
    rows = []
    for n in sizes:
        for seed in seeds:
            part = subset(data, n, seed)
            for name in ("vit", "cnn", "logistic"):
                if name == "logistic":
                    acc, sec = logistic_baseline(part)
                else:
                    torch.manual_seed(seed)
                    model = make_vit(seed) if name == "vit" else SmallCNN()
                    s = VIT_SETTINGS
                    lr = s["lr"] if name == "vit" else 3e-3
                    r = train_classifier(
                        model,
                        part,
                        epochs=s["epochs"],
                        lr=lr,
                        batch_size=s["batch_size"],
                        weight_decay=s["weight_decay"],
                        seed=seed,
                        min_steps=min_steps,
                    )
                    acc, sec = r.accuracy, r.seconds
                rows.append(
                    {"model": name, "n_train": n, "seed": seed, "accuracy": acc, "seconds": sec}
                )
                if progress:
                    print(f"{name:9} n={n:5} seed={seed}: {acc:.3f} ({sec:.1f} s)", flush=True)
    return rows
