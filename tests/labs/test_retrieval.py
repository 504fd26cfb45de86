"""course_lib.labs.retrieval: BM25 by hand and against scikit-learn, fusion, the index, metrics."""

import math

import numpy as np
import pytest
import torch
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

from course_lib.data import CharTokenizer
from course_lib.encoder import MaskedLM
from course_lib.labs.retrieval import (
    BM25,
    BiEncoder,
    ExactIndex,
    IVFIndex,
    PhraseReranker,
    evaluate,
    make_queries,
    reciprocal_rank_fusion,
    speeches,
    words,
)
from course_lib.model import GPTConfig

DOCS = ["the cat sat", "the dog sat on the dog", "a bird"]


def test_bm25_by_hand():
    bm = BM25(DOCS, k1=1.5, b=0.75)
    # "dog": in 1 of 3 documents; doc 1 has 6 words, twice "dog"; average length 11/3
    idf = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    norm = 1.5 * (1 - 0.75 + 0.75 * 6 / (11 / 3))
    expected = idf * 2 * 2.5 / (2 + norm)
    assert bm.scores("dog") == pytest.approx([0.0, expected, 0.0])
    # "the" in 2 of 3: a lower idf than "dog"; an unknown word adds nothing
    assert bm.idf[bm.vocab["the"]] < bm.idf[bm.vocab["dog"]]
    assert bm.scores("unicorn") == pytest.approx([0, 0, 0])


def test_bm25_counts_agree_with_scikit_learn():
    docs = [sp["text"] for sp in speeches(_TEXT, min_words=3)]
    bm = BM25(docs)
    cv = CountVectorizer(token_pattern=r"[a-z']+", lowercase=True)
    ref = cv.fit_transform(docs)  # (N, vocab) in scikit-learn's own order
    order = [bm.vocab[w] for w in cv.get_feature_names_out()]
    assert (bm.counts[:, order] != ref).nnz == 0
    # with b = 0 and a huge k1, BM25 tends to sum tf x idf: the same top document as
    # scikit-learn's unnormalised TF-IDF for a one-word query
    bm_tf = BM25(docs, k1=1e9, b=0.0)
    tfidf = TfidfVectorizer(token_pattern=r"[a-z']+", norm=None).fit(docs)
    for q in ("lord", "love", "king"):
        col = tfidf.vocabulary_[q]
        ours = bm_tf.scores(q)
        theirs = tfidf.transform(docs)[:, col].toarray().ravel()
        assert np.argmax(ours) == np.argmax(theirs)
        # both proportional to the term count in each document
        assert np.corrcoef(ours, theirs)[0, 1] == pytest.approx(1.0)


def test_rrf_and_metrics():
    a, b = np.array([0, 1, 2]), np.array([1, 2, 0])
    # by hand: doc 0 gets 1/61 + 1/63, doc 1 gets 1/62 + 1/61, doc 2 gets 1/63 + 1/62
    fused = {0: 1 / 61 + 1 / 63, 1: 1 / 62 + 1 / 61, 2: 1 / 63 + 1 / 62}
    expected = sorted(fused, key=lambda d: -fused[d])
    assert list(reciprocal_rank_fusion([a, b])) == expected == [1, 0, 2]
    m = evaluate([np.array([3, 1, 2]), np.array([0, 2, 1])], [1, 5])
    assert m["recall@1"] == 0 and m["recall@10"] == 0.5
    assert m["mrr"] == pytest.approx((1 / 2 + 0) / 2)
    with pytest.raises(ValueError, match="one ranking per target"):
        evaluate([a], [1, 2])


def test_phrase_reranker_uses_word_order():
    docs = ["sat the dog on cat", "the dog sat on the cat"]
    bm = BM25(docs)
    # same words, so BM25 nearly ties; the order "dog sat on" is only in document 1
    out = PhraseReranker(bm, docs).rerank("dog sat on", np.array([0, 1]))
    assert out[0] == 1


def test_queries_come_from_their_document():
    docs = [sp["text"] for sp in speeches(_TEXT, min_words=3)]
    for q, i in make_queries(docs, 3, n_words=3, seed=1):
        assert len(q.split()) == 3
        assert set(q.split()) <= set(words(docs[i]))
    with pytest.raises(ValueError, match="at least 2"):
        make_queries(docs, 1, n_words=1)


def test_ivf_with_every_cluster_probed_is_exact():
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(200, 8)).astype(np.float32)
    q = rng.normal(size=8).astype(np.float32)
    ivf = IVFIndex(vecs, n_clusters=10)
    assert list(ivf.search(q, 5, n_probe=10)) == list(ExactIndex(vecs).search(q, 5))
    assert ivf.last_scanned == 200
    ivf.search(q, 5, n_probe=1)
    assert ivf.last_scanned < 200
    with pytest.raises(ValueError, match="n_clusters"):
        IVFIndex(vecs, n_clusters=0)


def test_bi_encoder_batches_like_one_at_a_time():
    tok = CharTokenizer.from_text(_TEXT)
    torch.manual_seed(0)
    cfg = GPTConfig(
        vocab_size=tok.vocab_size + 1, block_size=8, n_layer=1, n_head=2, d_model=16, pos="rope"
    )
    enc = BiEncoder(MaskedLM(cfg), tok)
    texts = ["the king is dead", "long live the king, my lord", "o"]
    together = enc.encode(texts)
    alone = np.concatenate([enc.encode([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-5)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    # by hand for the one-window text: mean of the encoder's vectors, normalised
    ids = tok.encode("o")[None]
    h = enc.mlm.encoder(enc.mlm.tok_emb(ids))[0].mean(0)
    assert np.allclose(together[2], (h / h.norm()).detach().numpy(), atol=1e-5)


_TEXT = """KING.
My lord, the king is come; long live the king.

HAMLET.
To be, or not to be, that is the question of my love.

[Exeunt.]

QUEEN.
Good night, sweet prince, my lord and love, the king.
"""
