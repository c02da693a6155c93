import itertools

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy.special import logsumexp

from pm_perm.distributions.ordinal_n_choose_k import OrdinalNChooseK
from pm_perm.inference import laplace_whitening
from pm_perm.learning_to_rank.data import RankingSplit
from pm_perm.learning_to_rank.metrics import evaluate_ranking
from pm_perm.learning_to_rank.ordinal import (
    OrdinalRanker,
    ordinal_model,
    pad_queries,
)


def _enumerated_loglik(theta, labels, R):
    """log p(y | counts) of the ordinal n-choose-k model, normalisers summed over all subsets."""
    theta, labels = np.asarray(theta, dtype=float), np.asarray(labels)
    total = 0.0
    for r in range(1, R):
        pool = np.flatnonzero(labels <= r)
        k = int(np.sum(labels == r))
        sizes = [theta[list(c)].sum() for c in itertools.combinations(pool, k)]
        total += theta[labels == r].sum() - logsumexp(sizes)
    return total


def _split(query_labels, n_features, seed):
    """A RankingSplit with the given per-query labels and normal features."""
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.asarray(q) for q in query_labels]).astype(np.int64)
    ptr = np.concatenate([[0], np.cumsum([len(q) for q in query_labels])])
    return RankingSplit(X=rng.normal(size=(y.size, n_features)), y=y, group_ptr=ptr,
                        qids=np.arange(len(query_labels)))


def _synthetic(n_queries, theta, seed, sizes=(6, 15)):
    """Queries of varying length whose labels are 3 quantile levels of a noisy linear score."""
    rng = np.random.default_rng(seed)
    n = rng.integers(sizes[0], sizes[1] + 1, size=n_queries)
    X = rng.normal(size=(n.sum(), theta.size))
    s = X @ theta + rng.normal(scale=0.5, size=X.shape[0])
    ptr = np.concatenate([[0], np.cumsum(n)])
    y = np.zeros(X.shape[0], dtype=np.int64)
    for q in range(n_queries):
        rows = slice(ptr[q], ptr[q + 1])
        y[rows] = np.digitize(s[rows], np.quantile(s[rows], [0.6, 0.85]))
    return RankingSplit(X=X, y=y, group_ptr=ptr, qids=np.arange(n_queries))


# ------------------------------------------------------------------------------ likelihood


def test_enumerated_likelihood_is_a_distribution_given_the_counts():
    """The oracle itself: p(y | k) sums to 1 over all labelings with the same counts."""
    theta = np.array([0.3, -1.2, 2.0, 0.0, 0.7])
    counts = (2, 2, 1)  # labels 0, 1, 2
    base = np.repeat(np.arange(3), counts)
    total = logsumexp([
        _enumerated_loglik(theta, np.array(p), 3) for p in set(itertools.permutations(base))
    ])
    np.testing.assert_allclose(total, 0.0, atol=1e-12)


def test_model_logp_is_prior_plus_enumerated_likelihood():
    """Queries of lengths 3..7 (padded to 7), labels 0..2 and 0..3, against enumeration."""
    split = _split([[0, 2, 1], [1, 0, 0, 1, 2, 0], [0, 0, 0, 0], [3, 0, 1, 0, 2, 1, 0], [1, 0]],
                   n_features=3, seed=0)
    padded = pad_queries(split)
    assert padded.n_levels == 4 and padded.n_skipped_queries == 1  # [0, 0, 0, 0] is skipped
    assert padded.X.shape == (4, 7, 3)
    theta = np.array([0.8, -0.4, 1.3])
    logp = ordinal_model(padded, prior_sigma=2.0).compile_logp()({"theta": theta})
    prior = -0.5 * np.sum((theta / 2.0) ** 2) - 3 * np.log(2.0 * np.sqrt(2 * np.pi))
    s = split.X @ theta
    ptr = split.group_ptr
    lik = sum(_enumerated_loglik(s[ptr[q]:ptr[q + 1]], split.y[ptr[q]:ptr[q + 1]], 4)
              for q in range(split.n_queries))
    np.testing.assert_allclose(logp, prior + lik, rtol=1e-10)


def test_padding_matches_unpadded_likelihood_and_gradient():
    """One padded (Q, D_max) term == the sum of per-query unpadded OrdinalNChooseK terms, value
    and gradient, also with extreme scores."""
    split = _synthetic(6, np.array([1.0, -0.5, 0.2]), seed=1, sizes=(3, 12))
    padded = pad_queries(split)
    assert padded.mask.sum() == split.n_docs and not np.all(padded.mask)
    model = ordinal_model(padded, prior_sigma=1.0)
    both = model.compile_fn([model.logp(), model.dlogp()])
    # unpadded: one query at a time through one compiled function of (logits, labels)
    logits, labels = pt.vector("logits"), pt.lvector("labels")
    lp = pm.logp(OrdinalNChooseK.dist(logits=logits, n_levels=3), labels)
    single = pytensor.function([logits, labels], [lp, pytensor.grad(lp, logits)])
    rng = np.random.default_rng(2)
    for scale in (0.5, 3.0, 40.0):
        theta = scale * rng.normal(size=3)
        value, grad = -0.5 * theta @ theta - 1.5 * np.log(2 * np.pi), -theta
        for q in range(split.n_queries):
            rows = slice(split.group_ptr[q], split.group_ptr[q + 1])
            v, g = single(split.X[rows] @ theta, split.y[rows])
            value, grad = value + v, grad + split.X[rows].T @ g
        padded_value, padded_grad = both({"theta": theta})
        np.testing.assert_allclose(padded_value, value, rtol=1e-10)
        np.testing.assert_allclose(padded_grad, grad, rtol=1e-8, atol=1e-10)


def test_three_levels_with_one_document_each_is_plackett_luce():
    """R = D = 3, one document per label: the strict ranking's Plackett-Luce probability."""
    split = _split([[2, 0, 1]], n_features=2, seed=3)
    theta = np.array([0.5, -1.5])
    s = split.X @ theta
    pl = s[0] - logsumexp(s) + s[2] - logsumexp(s[[1, 2]])
    logp = ordinal_model(pad_queries(split), prior_sigma=1.0).compile_logp()({"theta": theta})
    prior = -0.5 * np.sum(theta**2) - np.log(2 * np.pi)
    np.testing.assert_allclose(logp - prior, pl, rtol=1e-10)


def test_whitened_model_has_the_same_posterior_density():
    split = _synthetic(5, np.array([1.0, -0.5, 0.2]), seed=4)
    padded = pad_queries(split)
    rng = np.random.default_rng(5)
    loc, L = rng.normal(size=3), rng.normal(size=(3, 3))
    plain = ordinal_model(padded, prior_sigma=2.0).compile_logp()
    white = ordinal_model(padded, prior_sigma=2.0, whitening=(loc, L)).compile_logp()
    for _ in range(3):
        z = rng.normal(size=3)
        np.testing.assert_allclose(white({"z": z}), plain({"theta": loc + L @ z}), rtol=1e-10)


def test_laplace_whitening_inverts_the_hessian():
    """L L^T is the inverse Hessian of -log p: L^T H L = I for H by differences of the gradient
    (the step used by laplace_whitening at loc = 0)."""
    split = _synthetic(8, np.array([1.0, -0.5, 0.2]), seed=6)
    model = ordinal_model(pad_queries(split), prior_sigma=1.0)
    loc, L = laplace_whitening(model, np.zeros(3))
    dlogp = model.compile_dlogp()
    H = np.array([-(dlogp({"theta": 1e-4 * e}) - dlogp({"theta": -1e-4 * e})) / 2e-4
                  for e in np.eye(3)])
    np.testing.assert_allclose(L.T @ H @ L, np.eye(3), atol=1e-5)


def test_pad_queries_errors():
    with pytest.raises(ValueError, match="RankingSplit"):
        pad_queries(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="two different labels"):
        pad_queries(_split([[0, 0], [1, 1, 1]], 2, seed=0))
    with pytest.raises(ValueError, match="exceed every label"):
        pad_queries(_split([[0, 2, 1]], 2, seed=0), n_levels=2)
    with pytest.raises(ValueError, match="prior_sigmas"):
        OrdinalRanker(prior_sigmas=(1.0, -1.0))
    with pytest.raises(ValueError, match="L-BFGS-B memory"):
        OrdinalRanker(lbfgs_memory=0)


# ------------------------------------------------------------------------------ fitting


def test_fit_map_recovers_direction_and_ranks_well():
    theta = np.array([1.0, -0.5, 0.25])
    train = _synthetic(30, theta, seed=7)
    valid = _synthetic(15, theta, seed=8)
    test = _synthetic(30, theta, seed=9)
    ranker = OrdinalRanker(prior_sigmas=(0.1, 10.0)).fit_map(train, valid)
    assert set(ranker.validation_) == {0.1, 10.0}
    assert ranker.prior_sigma_ in (0.1, 10.0)
    cosine = ranker.theta_ @ theta / np.linalg.norm(ranker.theta_) / np.linalg.norm(theta)
    assert cosine > 0.95
    fitted = evaluate_ranking(ranker.decision_function(test.X), test.y, test.group_ptr, ks=(3,))
    best = evaluate_ranking(test.X @ theta, test.y, test.group_ptr, ks=(3,))
    random = evaluate_ranking(np.zeros(test.n_docs), test.y, test.group_ptr, ks=(3,),
                              ties="random", seed=0)
    assert fitted["ndcg@3"] > random["ndcg@3"] + 0.3
    assert fitted["ndcg@3"] > best["ndcg@3"] - 0.05


def test_map_matches_scipy_on_the_enumerated_objective():
    """The MAP of the tiny model equals a direct optimisation of the enumerated log-posterior;
    with standardised features (the default) the only change is the prior, N(0, sigma^2) on
    the standardised coefficients scale * theta."""
    from scipy.optimize import minimize

    split = _split([[0, 2, 1, 0], [1, 0, 0, 1, 2], [0, 1, 0]], n_features=2, seed=10)
    ptr = split.group_ptr
    scale = split.X.std(axis=0)

    def neg_log_post(th, prior_scale):
        s = split.X @ th
        lik = sum(_enumerated_loglik(s[ptr[q]:ptr[q + 1]], split.y[ptr[q]:ptr[q + 1]], 3)
                  for q in range(split.n_queries))
        return -(lik - 0.5 * np.sum((th * prior_scale / 1.5) ** 2))

    for standardize, prior_scale in ((False, np.ones(2)), (True, scale)):
        ranker = OrdinalRanker(prior_sigmas=(1.5,), standardize=standardize).fit_map(split)
        ref = minimize(neg_log_post, np.zeros(2), args=(prior_scale,), method="BFGS",
                       options={"gtol": 1e-9}).x
        np.testing.assert_allclose(ranker.theta_, ref, atol=1e-4)
        # a longer L-BFGS memory reaches the same optimum
        other = OrdinalRanker(prior_sigmas=(1.5,), lbfgs_memory=50,
                              standardize=standardize).fit_map(split)
        np.testing.assert_allclose(other.theta_, ref, atol=1e-4)
    assert other.map_results_[1.5].success


@pytest.mark.numba  # NUTS runs a graph thousands of times: compiled, as a user's
@pytest.mark.slow
def test_fit_nuts_posterior_is_centred_near_the_map():
    theta = np.array([1.0, -0.5])
    train = _synthetic(20, theta, seed=11)
    ranker = OrdinalRanker(prior_sigmas=(3.0,)).fit_map(train)
    theta_map = ranker.theta_.copy()
    ranker.fit_nuts(train, draws=300, tune=300, chains=2, random_seed=1)
    assert ranker.theta_draws_.shape == (600, 2)
    sd = ranker.theta_draws_.std(axis=0)
    assert np.all(np.abs(ranker.theta_ - theta_map) < 0.5 * sd + 0.05)
    assert ranker.decision_function(train.X, draws=True).shape == (600, train.n_docs)


@pytest.mark.slow
@pytest.mark.data
def test_mq2008_fold1_map(shared_data):
    """Fold 1 of MQ2008 at prior scale 10 (the one validation picks): measured test NDCG@5
    (LETOR-4.0 discount) 0.4607; ridge regression 0.4514."""
    from pm_perm.datasets.mq2008 import load_mq2008_fold

    train, _, test = load_mq2008_fold(1, shared_data)
    ranker = OrdinalRanker(prior_sigmas=(10.0,)).fit_map(train)
    m = evaluate_ranking(ranker.decision_function(test.X), test.y, test.group_ptr, ks=(5,),
                         convention="letor4")
    assert m["ndcg@5"] > 0.44
    assert ranker.timings_["map"] < 120


def test_labels_and_n_levels_beyond_max_label_are_refused_quickly():
    import time

    X = np.random.default_rng(0).normal(size=(6, 2))
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"y: relevance label 3000 .*MAX_LABEL = 100"):
        OrdinalRanker().fit_map(RankingSplit(X, [0, 1, 2, 0, 1, 3000], [0, 3, 6], [1, 2]))
    split = RankingSplit(X, [0, 1, 2, 0, 1, 1], [0, 3, 6], [1, 2])
    with pytest.raises(ValueError, match=r"n_levels must be .*at most MAX_LABEL \+ 1 = 101"):
        OrdinalRanker(n_levels=3000).fit_map(split)
    assert time.perf_counter() - t0 < 5
