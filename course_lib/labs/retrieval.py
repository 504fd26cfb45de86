"""Document search over the corpus's speeches (Chapter 11): BM25, a bi-encoder, rank fusion,
a re-ranker that reads query and document together, and a vector index.

- ``speeches``: the corpus cut into speeches (a speaker's line, then what they say).
- ``make_queries``: held-out queries: a few consecutive words of one line of a speech, one
  word dropped, lower-cased; the speech is the one right answer.
- ``BM25``: Okapi BM25 (Robertson and Zaragoza 2009) written out on a sparse term-count matrix;
  ``words`` is its tokenizer.
- ``BiEncoder``: Chapter 11's masked language model as a sentence encoder: mean of its final
  vectors over 48-character windows, L2-normalised; query and document are encoded apart.
- ``reciprocal_rank_fusion``: combine rankings (Cormack et al. 2009).
- ``PhraseReranker``: a second stage that reads query and document together (word order),
  applied to a first stage's top k: the shape of a cross-encoder re-ranker, without training.
- ``ExactIndex`` / ``IVFIndex``: top-k by inner product over all vectors, or over the vectors
  of the ``n_probe`` nearest k-means clusters (an inverted-file index, as in FAISS's IVF).
- ``evaluate``: recall@k and mean reciprocal rank of a ranking.
"""

from __future__ import annotations

import math
import random
import re

import numpy as np
import torch
import torch.nn.functional as F
from scipy import sparse

__all__ = [
    "RETRIEVAL_SETTINGS",
    "speeches",
    "make_queries",
    "words",
    "BM25",
    "BiEncoder",
    "reciprocal_rank_fusion",
    "bigrams",
    "PhraseReranker",
    "ExactIndex",
    "IVFIndex",
    "evaluate",
]

#: The chapter's demo: how many speeches, queries, words per query, BM25's k1 and b, the
#: re-ranker's depth, the index's clusters and probes.
RETRIEVAL_SETTINGS = {
    "n_docs": 1000,
    "n_queries": 100,
    "query_words": 5,
    "k1": 1.5,
    "b": 0.75,
    "rerank_depth": 10,
    "n_clusters": 32,
    "n_probe": 4,
    "seed": 0,
}

_SPEAKER = re.compile(r"^[A-Z][A-Z0-9 ,.'&\-]*[A-Z]\.$")
_WORD = re.compile(r"[a-z']+")


def speeches(text: str, min_words: int = 12, max_chars: int = 600) -> list[dict]:
    """The speeches of the corpus, in order: {"speaker", "text"} for every blank-line block
    whose first line is a speaker's name in capitals followed by a full stop, with at least
    ``min_words`` words and at most ``max_chars`` characters (stage directions left out)."""
    out = []
    for block in text.split("\n\n"):
        lines = block.strip("\n").split("\n")
        if len(lines) < 2 or not _SPEAKER.match(lines[0]):
            continue
        body = "\n".join(lines[1:])
        if len(words(body)) >= min_words and len(body) <= max_chars:
            out.append({"speaker": lines[0][:-1], "text": body})
    return out


def words(text: str) -> list[str]:
    """Lower-cased words (letters and apostrophes): BM25's tokens."""
    return _WORD.findall(text.lower())


def make_queries(docs: list[str], n: int, n_words: int = 5, seed: int = 0) -> list[tuple]:
    """``n`` queries (query, index of its document): ``n_words`` + 1 consecutive words of one
    line of a random document, with one word other than the first and last dropped."""
    if n_words < 2:
        raise ValueError(f"make_queries: n_words must be at least 2; got {n_words}.")
    rng = random.Random(seed)
    out, order = [], list(range(len(docs)))
    rng.shuffle(order)
    for i in order:
        lines = [ws for ws in (words(line) for line in docs[i].split("\n")) if len(ws) > n_words]
        if not lines:
            continue
        ws = rng.choice(lines)
        start = rng.randrange(len(ws) - n_words)
        span = ws[start : start + n_words + 1]
        del span[rng.randrange(1, n_words)]  # the perturbation: a word left out
        out.append((" ".join(span), i))
        if len(out) == n:
            return out
    raise ValueError(f"make_queries: only {len(out)} documents have a line of > {n_words} words.")


class BM25:
    """Okapi BM25 over documents (strings). For a query q and document D,

        score(q, D) = sum over words w of q:  idf(w) tf(w, D) (k1 + 1)
                                              / (tf(w, D) + k1 (1 - b + b |D| / avgdl))
        idf(w) = ln(1 + (N - n(w) + 0.5) / (n(w) + 0.5))

    (the variant of Lucene; N documents, n(w) of them contain w). ``counts`` is the
    (N, vocabulary) sparse term-count matrix; ``scores(query)`` -> (N,)."""

    def __init__(self, docs: list[str], k1: float = 1.5, b: float = 0.75):
        if not docs:
            raise ValueError("BM25: no documents.")
        self.k1, self.b = k1, b
        self.vocab: dict[str, int] = {}
        rows, cols = [], []
        for i, doc in enumerate(docs):
            for w in words(doc):
                rows.append(i)
                cols.append(self.vocab.setdefault(w, len(self.vocab)))
        data = np.ones(len(rows))
        shape = (len(docs), len(self.vocab))
        self.counts = sparse.csr_matrix((data, (rows, cols)), shape=shape)  # duplicates summed
        self.doc_len = np.asarray(self.counts.sum(axis=1)).ravel()  # (N,)
        self.avgdl = self.doc_len.mean()
        df = np.asarray((self.counts > 0).sum(axis=0)).ravel()  # (vocab,)
        N = len(docs)
        self.idf = np.log(1 + (N - df + 0.5) / (df + 0.5))  # (vocab,)
        self._counts_csc = self.counts.tocsc()

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query``: (N,)."""
        norm = self.k1 * (1 - self.b + self.b * self.doc_len / self.avgdl)  # (N,)
        total = np.zeros(self.counts.shape[0])
        for w in words(query):  # a repeated query word counts again, as in Lucene
            j = self.vocab.get(w)
            if j is None:
                continue
            tf = self._counts_csc[:, j].toarray().ravel()  # (N,)
            total += self.idf[j] * tf * (self.k1 + 1) / (tf + norm)
        return total


class BiEncoder:
    """A masked language model (``course_lib.encoder.MaskedLM``) used as a text encoder: the
    final hidden vectors of every character, in windows of block_size characters, averaged
    and L2-normalised. ``encode(texts)`` -> (n, d) float32."""

    def __init__(self, mlm, tok):
        self.mlm, self.tok = mlm.eval(), tok

    def _ids(self, text: str) -> torch.Tensor:
        known = "".join(c for c in text if c in self.tok.stoi)
        return self.tok.encode(known or " ")  # (L,)

    @torch.no_grad()
    def encode(self, texts: list[str]) -> np.ndarray:
        T = self.mlm.cfg.block_size
        windows, owner = [], []
        for n, text in enumerate(texts):
            ids = self._ids(text)  # (L,)
            for s in range(0, len(ids), T):
                windows.append(ids[s : s + T])
                owner.append(n)
        sums = torch.zeros(len(texts), self.mlm.cfg.d_model)  # (n, d)
        counts = torch.zeros(len(texts))  # (n,): characters per text
        # windows of one length go through the encoder together (no padding needed)
        for length in sorted({len(w) for w in windows}):
            pick = [i for i, w in enumerate(windows) if len(w) == length]
            x = self.mlm.tok_emb(torch.stack([windows[i] for i in pick]))  # (b, t, d)
            if self.mlm.pos_emb is not None:
                x = self.mlm.pos_emb(x)
            h = self.mlm.encoder(x)  # (b, t, d)
            who = torch.tensor([owner[i] for i in pick])  # (b,)
            sums.index_add_(0, who, h.sum(dim=1))
            counts.index_add_(0, who, torch.full((len(pick),), float(length)))
        v = sums / counts[:, None]  # (n, d): mean over every character of the text
        return F.normalize(v, dim=1).numpy()


def reciprocal_rank_fusion(rankings: list[np.ndarray], k: int = 60) -> np.ndarray:
    """Fuse rankings (each an (N,) array of document ids, best first) by
    sum 1 / (k + rank); returns the fused ranking (N,)."""
    N = len(rankings[0])
    fused = np.zeros(N)
    for ranking in rankings:
        fused[ranking] += 1.0 / (k + 1 + np.arange(N))
    return np.argsort(-fused, kind="stable")


def bigrams(ws: list[str]) -> set[tuple[str, str]]:
    """The pairs of adjacent words of a word list."""
    return set(zip(ws, ws[1:]))


class PhraseReranker:
    """A second stage that reads query and document *together*: BM25's score plus ``weight``
    per pair of adjacent query words that stand next to each other in the document, the
    word order a bag of words throws away. A trained cross-encoder (Nogueira and Cho 2019)
    learns such interactions with attention across the concatenated pair; like it, this
    scorer is applied only to a first stage's top k."""

    def __init__(self, bm25: BM25, docs: list[str], weight: float = 2.0):
        self.bm25, self.docs, self.weight = bm25, docs, weight

    def rerank(self, query: str, candidates: np.ndarray) -> np.ndarray:
        """``candidates`` (k,) re-ordered by BM25 + weight x shared adjacent pairs, best first."""
        first = self.bm25.scores(query)[candidates]  # (k,)
        pairs = bigrams(words(query))
        shared = np.array([len(pairs & bigrams(words(self.docs[i]))) for i in candidates])
        return candidates[np.argsort(-(first + self.weight * shared), kind="stable")]


class ExactIndex:
    """Exact maximum-inner-product search: every vector scored. ``search(q, k)`` -> ids (k,)."""

    def __init__(self, vectors: np.ndarray):
        self.vectors = vectors  # (N, d)

    def search(self, query: np.ndarray, k: int) -> np.ndarray:
        return np.argsort(-(self.vectors @ query), kind="stable")[:k]


class IVFIndex:
    """Inverted-file index: k-means (scikit-learn) splits the vectors into ``n_clusters``
    lists; a query scores only the vectors of its ``n_probe`` nearest centroids.
    ``search(q, k)`` -> ids (k,); ``last_scanned``: how many vectors the last search scored."""

    def __init__(self, vectors: np.ndarray, n_clusters: int, seed: int = 0):
        from sklearn.cluster import KMeans

        if not 1 <= n_clusters <= len(vectors):
            raise ValueError(
                f"IVFIndex: n_clusters must lie in 1..{len(vectors)}; got {n_clusters}."
            )
        self.vectors = vectors  # (N, d)
        km = KMeans(n_clusters=n_clusters, n_init=1, random_state=seed).fit(vectors)
        self.centroids = km.cluster_centers_  # (n_clusters, d)
        self.lists = [np.flatnonzero(km.labels_ == c) for c in range(n_clusters)]
        self.last_scanned = 0

    def search(self, query: np.ndarray, k: int, n_probe: int = 1) -> np.ndarray:
        near = np.argsort(-(self.centroids @ query), kind="stable")[:n_probe]
        ids = np.concatenate([self.lists[c] for c in near])  # the probed lists
        self.last_scanned = len(ids)
        return ids[np.argsort(-(self.vectors[ids] @ query), kind="stable")[:k]]


def evaluate(rankings: list[np.ndarray], targets: list[int], ks=(1, 10)) -> dict:
    """recall@k (the right document among the first k) for each k, and the mean reciprocal
    rank (1 / rank of the right document; 0 if absent), over queries."""
    if len(rankings) != len(targets):
        raise ValueError("evaluate: one ranking per target, please.")
    ranks = []
    for ranking, t in zip(rankings, targets):
        hit = np.flatnonzero(np.asarray(ranking) == t)
        ranks.append(hit[0] + 1 if len(hit) else math.inf)
    out = {f"recall@{k}": float(np.mean([r <= k for r in ranks])) for k in ks}
    out["mrr"] = float(np.mean([1.0 / r for r in ranks]))
    return out
