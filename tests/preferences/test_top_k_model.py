"""models.top_k_model: the built likelihood is the top-k kernel's, K from the data, errors."""

import numpy as np
import pytest

from pm_perm.kernels.top_k import top_k_loglik_and_grad
from pm_perm.kernels.top_k_sampler import sample_top_k
from pm_perm.preferences import models as rmod
from pm_perm.preferences.data import RankingData


def _data(M=7, K=3, n=200, seed=0):
    rng = np.random.default_rng(seed)
    L = np.concatenate([rng.normal(size=(M, K)), np.zeros((M, 1))], 1)
    orders = sample_top_k(L, size=(n,), rng=rng)
    orders[:15] = np.where(orders[:15] == K - 1, -1, orders[:15])  # some shorter ballots
    orders[15:20] = np.where(orders[15:20] >= 1, -1, orders[15:20])
    return RankingData.from_orders(orders)


def test_likelihood_is_the_kernels_and_k_comes_from_the_data():
    data = _data()
    rm = rmod.top_k_model(data, tau=0.7)
    assert rm.family == "top-k" and rm.model["W"].eval().shape == (1, 7, 4)
    model = rm.model
    ip = model.initial_point()
    rng = np.random.default_rng(1)
    point = {k: v + rng.normal(scale=0.3, size=np.shape(v)) for k, v in ip.items()}
    logp = model.compile_logp(vars=[model["ballots"]], jacobian=False)(point)
    W, lp_len = model.compile_fn(model.replace_rvs_by_values([model["W"],
                                                              model["length_probs"]]),
                                 inputs=model.value_vars, on_unused_input="ignore")(point)
    total, _ = top_k_loglik_and_grad(W[0], data.orders, data.counts.astype(float))
    k = (data.orders >= 0).sum(1)
    np.testing.assert_allclose(logp, total + data.counts @ np.log(lp_len[k]), rtol=1e-10)


def test_k_equals_m_mean_is_the_full_models_rank_one_mean():
    data = _data(M=4, K=4, n=60)
    rm = rmod.top_k_model(data, tau=0.0)
    full = rmod.full_model(data, tau=0.0)
    u = np.array([[0.5, -1.0, 0.2]])
    a = rm.model.compile_fn(rm.model["W"], inputs=[rm.model["u_raw"]],
                            on_unused_input="ignore")({"u_raw": u})
    b = full.model.compile_fn(full.model["W"], inputs=[full.model["u_raw"]],
                              on_unused_input="ignore")({"u_raw": u})
    np.testing.assert_allclose(a[0, :, :4], b[0], atol=1e-12)


def test_bad_k_and_components_are_named():
    data = _data()
    with pytest.raises(ValueError, match="more than K = 2"):
        rmod.top_k_model(data, K=2)
    with pytest.raises(ValueError, match="K must be an integer in 1..M = 7"):
        rmod.top_k_model(data, K=8)
    with pytest.raises(ValueError, match="components"):
        rmod.top_k_model(data, components=0)


def _mixture_point(rm, seed):
    rng = np.random.default_rng(seed)
    return {k: v + rng.normal(scale=0.5, size=np.shape(v))
            for k, v in rm.model.initial_point().items()}


def test_mixture_likelihood_is_the_exact_marginal_over_components():
    """C = 2: the observed ballots' logp is sum_i counts_i (logsumexp_c(log w_c + log p_c(t_i))
    + log length_probs[k_i]), each component's log p_c by the top-k kernel (itself checked
    against brute force in tests/kernels/test_top_k.py); the pointwise log-likelihood has one
    row per ballot, each its own value."""
    from scipy.special import logsumexp

    from pm_perm.kernels.top_k import top_k_loglik

    data = _data(M=6, K=3, n=120, seed=3)
    rm = rmod.top_k_model(data, tau=0.8, components=2)
    model = rm.model
    assert model["W"].eval().shape == (2, 6, 4)
    point = _mixture_point(rm, 2)
    W, lp_len, w = model.compile_fn(model.replace_rvs_by_values(
        [model["W"], model["length_probs"], model["mixture_weights"]]),
        inputs=model.value_vars, on_unused_input="ignore")(point)
    logp = model.compile_logp(vars=[model["ballots"]], jacobian=False)(point)
    comp = top_k_loglik(W, data.orders)  # (2, n_distinct)
    k = (data.orders >= 0).sum(1)
    per_order = logsumexp(np.log(w)[:, None] + comp, axis=0) + np.log(lp_len[k])
    np.testing.assert_allclose(logp, data.counts @ per_order, rtol=1e-10)
    rows = model.compile_fn(model.logp(vars=[model["ballots"]], sum=False)[0],
                            inputs=model.value_vars, on_unused_input="ignore")(point)
    assert rows.shape == (data.n_rankings,)
    np.testing.assert_allclose(rows, np.repeat(per_order, data.counts), rtol=1e-10)


def test_mixture_map_separates_two_blocs():
    """Two blocs with opposite top-3 preferences (M = 6, 600 ballots each): the two-component
    MAP (multi-start) finds both, weights near 0.5, each component's favourite one bloc's."""
    from pm_perm.preferences.fitting import fit_map

    rng = np.random.default_rng(5)
    M = 6
    u = np.linspace(2.0, -2.0, M)
    L1 = np.concatenate([np.outer(u, [3.0, 2.0, 1.0]), np.zeros((M, 1))], 1)
    orders = np.concatenate([sample_top_k(L1, size=(600,), rng=rng),
                             sample_top_k(L1[::-1], size=(600,), rng=rng)])
    data = RankingData.from_orders(orders)
    two = fit_map(rmod.top_k_model(data, tau=0.5, components=2), seed=0, n_starts=3)
    np.testing.assert_allclose(np.sort(np.asarray(two["mixture_weights"])), [0.5, 0.5],
                               atol=0.06)
    W = np.asarray(two["W"])  # (2, M, K + 1)
    firsts = sorted(int(np.argmax(W[c, :, 0])) for c in range(2))
    assert firsts == [0, M - 1]


def test_centred_top_k_model_is_the_same_model():
    """parametrization="centered": free W_raw (the Helmert coordinates of W) instead of
    delta_raw. Its density at W_raw = Bm^T m Bk + tau delta_raw (m the rank-one mean u m^T) is
    the non-centred one less the Jacobian log tau^((M-1) K): the same posterior in other
    coordinates; its W is the non-centred W double-centred (row and column shifts change no
    probability). Graphs in FAST_COMPILE mode (no numba compilation: a fast test)."""
    import pytensor

    data = _data(M=5, K=2, n=80, seed=4)
    nc = rmod.top_k_model(data)
    ce = rmod.top_k_model(data, parametrization="centered")
    assert (nc.parametrization, ce.parametrization) == ("noncentered", "centered")
    assert "delta_raw" in nc.model.named_vars and "delta_raw" not in ce.model.named_vars
    assert ce.model.named_vars_to_dims["W_raw"] == ("component", "item_basis",
                                                     "top_position_basis")  # (C, M - 1, K)
    fast = pytensor.compile.mode.get_mode("FAST_COMPILE")

    def fns(m):
        model = m.model
        W = model.replace_rvs_by_values([model["W"]])[0]
        return (model.compile_logp(jacobian=False, mode=fast),
                model.compile_fn(W, inputs=model.value_vars, on_unused_input="ignore",
                                 mode=fast))

    (lp_nc, W_nc), (lp_ce, W_ce) = fns(nc), fns(ce)
    M, K = 5, 2
    Bk = rmod.zero_sum_basis(K + 1)
    c = rmod.harmonic_positions(M)
    m = np.append(c[:K], c[K:].mean())
    rng = np.random.default_rng(9)
    for _ in range(3):
        zu = rng.normal(size=(1, M - 1))
        tau = rng.uniform(0.2, 2.0)
        delta = rng.normal(size=(1, M - 1, K))
        shared = {"u_raw": zu, "tau_log__": np.log(tau),
                  "length_probs_simplex__": rng.normal(size=K)}
        W_raw = zu[:, :, None] * (m @ Bk)[None, None, :] + tau * delta
        p_nc, p_ce = {**shared, "delta_raw": delta}, {**shared, "W_raw": W_raw}
        np.testing.assert_allclose(lp_ce(p_ce), lp_nc(p_nc) - (M - 1) * K * np.log(tau),
                                   rtol=1e-10)
        Wn = W_nc(p_nc)
        Wn = Wn - Wn.mean(-1, keepdims=True) - Wn.mean(-2, keepdims=True) \
            + Wn.mean((-2, -1), keepdims=True)
        np.testing.assert_allclose(W_ce(p_ce), Wn, atol=1e-12)


def test_centred_top_k_model_refuses_a_fixed_tau_and_map():
    from pm_perm.preferences.fitting import fit_map

    data = _data(M=5, K=2, n=40, seed=5)
    with pytest.raises(ValueError, match="a fixed tau needs parametrization='noncentered'"):
        rmod.top_k_model(data, tau=0.5, parametrization="centered")
    for bad in ("centred", "auto"):  # no size rule for "auto" measured on the top-k model
        with pytest.raises(ValueError, match="parametrization must be 'noncentered' or"):
            rmod.top_k_model(data, parametrization=bad)
    with pytest.raises(ValueError, match="no MAP"):
        fit_map(rmod.top_k_model(data, parametrization="centered"))
