"""pm_perm: PyMC distributions over permutations and count-structured labels.

Glossary of the algorithms (value conventions in each object's docstring):

log_permanent
    Exact ``log perm(exp W)`` by the subset dynamic program over bitmasks, O(M 2^M) time,
    O(2^M) memory, scaled so only positive terms are added (Petterson et al. 2009, sec. 4.2).
permutation_marginals
    ``P[i, j] = p(y[i] = j)``, the gradient of ``log_permanent``, by a forward-backward pass
    over the same subset lattice: same order of cost as the value.
glynn_log_permanent (M = 27..32)
    Exact ``log perm`` and its marginals by Glynn's formula in Gray-code order, O(M 2^(M-1))
    time, O(M^2) memory, for M whose DP table does not fit: ``method="glynn"`` of
    ``PermutationExpFamily`` and of the permanent Ops (``pm_perm.kernels.glynn``).
max_weight_matching
    The mode of ``PermutationExpFamily``: a max-weight perfect matching (Hungarian algorithm),
    O(M^3); NumPy in :mod:`pm_perm.kernels.matching`, an Op in :mod:`pm_perm.ops.matching`.
bethe_log_permanent (large M)
    Bethe approximation, a lower bound of ``log perm`` (Gurvits), with its beliefs as gradient;
    CCCP/Sinkhorn fixed point, O(M^2) per sweep (Vontobel 2013; Huang & Jebara 2009).
huber_law_sample (large M)
    Exact accept-reject sampler with the Huber-Law bound (Huber & Law 2008), O(M^2) per trial;
    fast for dense, moderately spread weights only.
log_esp / conditional marginals (count-structured labels)
    Exact log e_k(exp theta) (conditional-Bernoulli normaliser) by a tilted probability-scale DP,
    O(D k); marginals p(y_d = 1 | k) = its gradient, O(sqrt(D) k) memory; Hessian-vector products
    by a tangent pass (Swersky et al. 2012).
log_esp_all_fft
    All k by the FFT product tree, O(D log^2 D) per pass, guarded by a round-off bound (re-tilts,
    exact-DP fallback).
learning_to_rank (features -> rankings)
    :mod:`pm_perm.learning_to_rank`: LETOR (qid:) and LightGBM (.query) readers,
    QueryLevelNorm, MQ2008 folds rebuilt from the test files (``data``); vectorised NDCG@k (gain
    2^r - 1, discount 1/log2(1 + r)), P@k, AP/MAP over flat arrays and query boundaries, with an
    option for LETOR 4.0's evaluation script (``metrics``); baselines.
learning_to_rank.rankmatch.RankMatch
    Petterson et al.'s learning-to-rank model: bootstrap subsets of M documents per query,
    W[i, j] = c_j <psi_i, theta>, exact weak-label likelihood (ties: product of block
    permanents minus log perm) as one batched term; MAP, whitened NUTS, per-draw rankings.
learning_to_rank.ordinal.OrdinalRanker / learning_to_rank.predictive
    Swersky et al.'s ordinal n-choose-k ranker on whole query lists (padded, one batched
    ``OrdinalNChooseK`` term); posterior predictive rankings by Plackett-Luce (Gumbel-max) draws.
matching
    Learned graph matching (Petterson et al. sec. 5.2): shape contexts, edge features
    ``(psi_i - psi'_j)^2``, CMU house and silhouette data, exact sub-matching composite
    likelihood, MAP / whitened NUTS, BCFW max-margin baseline, posterior marginals, calibration.
classification / datasets
    Count-prior classifiers (multi-object ``NChooseK`` with learned p(k | x), expected top-K gain)
    fitted by L-BFGS-B on the PyMC log posterior; embedded-digits generator, Caltech silhouettes.
plackett_luce / PlackettLuce
    Plackett-Luce log-likelihood of top-k and tied rank-form orders (ties: exact probability that
    a block fills its positions in any order, subset DP O(s 2^s)), O(M) per distinct order, its
    gradient by one reverse pass, Gumbel-max draws.
preferences (ranking data without features)
    :mod:`pm_perm.preferences`: PrefLib reader/writer, ``RankingData`` (orders aggregated with
    counts), Plackett-Luce and full ranking models and their mixtures, posterior analysis.
top_k_loglik / TopKRanking (any number of items)
    Exact top-k item-by-position model: logits for positions 0..K-1 and one "not in the top K"
    logit per item; the normaliser is the K x M rectangular permanent by a DP over subsets of
    the K positions, O(M K 2^K); ballots of length <= K with ties, gradient, exact draws.
partial_order_loglik / PartialRanking
    Exact likelihood of top-k and tied rankings under the permutation exponential family: one
    suffix subset table shared by all orders of one W, tie blocks by block permanents, gradient by
    one adjoint sweep; O(M 2^M + n M) for n distinct orders.
Mallows
    The Mallows model with footrule, Spearman, Hamming, Kendall, Cayley and Ulam distances
    (BayesMallows' alpha / n scaling): the exact distribution of the distance over all n!
    permutations, once per model (``pm_perm.kernels.mallows``), then log Z(alpha) by one
    log-sum-exp; exact draws (``pm_perm.kernels.mallows_sampling``).
swap_mcmc / PermutationSwapMetropolis (large M)
    Transposition Metropolis over permutations; the step method
    (:mod:`pm_perm.inference.step_methods`) is registered in PyMC's ``STEP_METHODS`` when
    :mod:`pm_perm.distributions` is imported (any model with a pm_perm variable does), so
    ``pm.sample`` assigns it to latent permutations.
inference
    :mod:`pm_perm.inference`, for any PyMC model: MAP fits compiled once per model and along a
    path of prior scales (``map``), the Laplace approximation (``laplace``), checks of a fit and
    of draws (``checks``), ``pm.sample`` with its outcome checked (``sampling``), the step
    method (``step_methods``).
backends.jax
    :mod:`pm_perm.backends.jax`: JAX implementations of every Op, registered with PyTensor's JAX
    linker (numpyro, blackjax, nutpie's JAX backend) when it is first imported.
reference
    :mod:`pm_perm.reference`: definitional oracles by enumeration (all M! permutations, all
    subsets, all orders consistent with a partial order), the ground truth of the tests.
testing
    :mod:`pm_perm.testing`: checks for users' models: draws against exact probabilities by
    chi-square (``check_draws_match_logp``), simulation-based calibration (``run_sbc``).
cli
    :mod:`pm_perm.cli`: the ``pm-perm`` command (``learn-to-rank``, ``preferences``).

``__all__`` is the symbolic API: the distributions, the model helpers that build PyTensor graphs
(``edge_logits``, ``expected_topk_gain``, ``log_expected_topk_gain``) and the checks of fits and
draws. NumPy functions stay in their modules (``pm_perm.kernels.matching.max_weight_matching``,
``pm_perm.distributions.n_choose_k.nchoosek_marginals``,
``pm_perm.distributions.ordinal_n_choose_k.optimal_ranking``,
``pm_perm.kernels.permanent.EXACT_MAX_M``, ...). The names of ``__all__`` and the subpackages are
imported on first use: ``import pm_perm`` itself imports neither PyMC, PyTensor nor numba; the
first distribution, Op or kernel you touch imports what it needs.
"""

__version__ = "0.1.0"

from pm_perm._lazy import lazy_attributes as _lazy_attributes  # noqa: E402
from pm_perm._numba import prepare_pytensor_cache as _prepare_pytensor_cache  # noqa: E402

_prepare_pytensor_cache()  # before PyTensor is imported (read-only HOME: a temporary cache)

from pm_perm.backends.jax import lazy as _jax_lazy  # noqa: E402

# JAX implementations of every Op (numpyro / blackjax / nutpie's JAX backend), registered with
# PyTensor's JAX linker when it is first imported (PM_PERM_NO_JAX=1: never).
_jax_lazy.install()

# The public names below are imported on first use (PEP 562), so that programs that need only a
# part of pm_perm (``pm-perm --help``, reading PrefLib files) do not import PyMC (2-3 s). The
# distributions register the latent-permutation step method with PyMC when they are imported
# (pm_perm.distributions), which any model with a pm_perm variable does.
_LAZY = {
    "BradleyTerry": "pm_perm.distributions",
    "ConditionalBernoulli": "pm_perm.distributions",
    "Mallows": "pm_perm.distributions",
    "MallowsPartial": "pm_perm.distributions",
    "NChooseK": "pm_perm.distributions",
    "OrdinalNChooseK": "pm_perm.distributions",
    "PartialOrder": "pm_perm.distributions",
    "PartialRanking": "pm_perm.distributions",
    "PermutationExpFamily": "pm_perm.distributions",
    "PlackettLuce": "pm_perm.distributions",
    "TopKRanking": "pm_perm.distributions",
    "edge_logits": "pm_perm.distributions",
    "expected_topk_gain": "pm_perm.ops.cardinality",
    "log_expected_topk_gain": "pm_perm.ops.cardinality",
    "check_find_map": "pm_perm.inference",
    "check_draws": "pm_perm.inference",
    "sampler_warnings": "pm_perm.inference",
    "MapFitError": "pm_perm.inference",
    "SamplingError": "pm_perm.inference",
}
__all__ = list(_LAZY)  # public name -> the module that defines it, above
# the public names of __all__ and the subpackages (pm_perm.preferences, ...), on first access
__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY, globals())
