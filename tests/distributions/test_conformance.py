"""Every pm_perm distribution: draws refuse exactly the parameters logp refuses, and non-integer
values get logp = -inf (never the logp of a truncated value). Issue 19, class 5. And the draws of
every family follow its logp (pm_perm.testing.check_draws_match_logp, chi-square over the support).

Each case is checked on both sampling paths: ``pm.draw`` (PyTensor's numba backend, the
default) and the Python ``rng_fn`` (other backends)."""

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pymc.logprob.utils import ParameterValueError

from pm_perm import (
    ConditionalBernoulli,
    NChooseK,
    OrdinalNChooseK,
    PartialRanking,
    PermutationExpFamily,
    PlackettLuce,
)
from pm_perm.reference.permutations import all_permutations
from pm_perm.reference.rankings import every_top_k_order
from pm_perm.reference.subsets import binary_vectors, ordinal_labelings
from pm_perm.testing import check_draws_match_logp

W3 = np.zeros((3, 3))
TH = np.array([0.5, -1.0, 2.0, 0.0])
NAN_TH = np.array([0.5, np.nan, 2.0, 0.0])
BIG_TH = np.array([0.5, 1.5e308, 2.0, 0.0])
INF_TH = np.array([0.5, np.inf, 2.0, 0.0])


def _w(i, j, v):
    W = W3.copy()
    W[i, j] = v
    return W


INFEASIBLE = np.array([[-np.inf, -np.inf, 0.0], [-np.inf, -np.inf, 0.0], [0.0, 0.0, 0.0]])
CP = np.array([0.1, 0.2, 0.3, 0.2, 0.2])
ORD_CP = np.tile(np.array([0.1, 0.2, 0.3, 0.2, 0.2]), (3, 1))
U3 = np.array([0.5, -1.0, 2.0])
LP = np.array([0.1, 0.2, 0.3, 0.4])  # length_probs of k = 0..3 ranked items (M = 3)


def _u(i, v):
    u = U3.copy()
    u[i] = v
    return u


def _family(name):
    """(inputs, rv) with symbolic parameters, so each family compiles once for all cases."""
    th, W = pt.tensor("th", shape=(4,)), pt.tensor("W", shape=(3, 3))
    if name == "exact":
        return [W], PermutationExpFamily.dist(W)
    if name == "bethe":
        return [W], PermutationExpFamily.dist(W, method="bethe")
    if name == "CB":
        k = pt.lscalar("k")
        return [th, k], ConditionalBernoulli.dist(th, k)
    if name == "NChooseK":
        cp = pt.tensor("cp", shape=(5,))
        return [th, cp], NChooseK.dist(th, cp)
    if name in ("PL", "PR"):  # Plackett-Luce / PartialRanking with symbolic weights
        w = pt.dscalar("w")
        par = pt.tensor("u", shape=(3,)) if name == "PL" else W
        dist = PlackettLuce if name == "PL" else PartialRanking
        return [par, w], dist.dist(par, weights=w)
    if name in ("PL lp", "PR lp"):  # ... with symbolic length_probs of any length
        lp = pt.tensor("lp", shape=(None,))
        par = pt.tensor("u", shape=(3,)) if name == "PL lp" else W
        dist = PlackettLuce if name == "PL lp" else PartialRanking
        return [par, lp], dist.dist(par, length_probs=lp)
    if name == "Ordinal counts":
        counts = pt.tensor("counts", shape=(3,), dtype="int64")
        return [th, counts], OrdinalNChooseK.dist(th, counts=counts)
    cp = pt.tensor("cp", shape=(3, 5))
    return [th, cp], OrdinalNChooseK.dist(th, count_probs=cp)


_COMPILED = {}


def _compiled(name):
    """(draw, logp, params) compiled functions of a family: draws by the numba backend (the
    default), logp and the parameters by the test's backend (tests/conftest.py)."""
    if name not in _COMPILED:
        inputs, rv = _family(name)
        value = pt.tensor("value", shape=rv.type.shape, dtype="int64")
        node = rv.owner
        _COMPILED[name] = (
            pytensor.function(inputs, rv, mode="NUMBA"),
            pytensor.function([*inputs, value], pm.logp(rv, value)),
            pytensor.function(inputs, node.op.dist_params(node)),
            node.op,
        )
    return _COMPILED[name]


ORD_BAD = np.array([[0.5, 0.5, 0, 0, 0], [1.5, -0.5, 0, 0, 0], [0, 1, 0, 0, 0]])

# (case, family, parameters, a value in the support)
BAD_PARAMS = [
    ("exact: NaN logits", "exact", [_w(0, 1, np.nan)], [0, 1, 2]),
    ("exact: +inf logits", "exact", [_w(0, 1, np.inf)], [0, 1, 2]),
    ("exact: logit 1.5e308", "exact", [_w(0, 1, 1.5e308)], [0, 1, 2]),
    ("exact: infeasible", "exact", [INFEASIBLE], [2, 0, 1]),
    ("bethe: NaN logits", "bethe", [_w(2, 1, np.nan)], [0, 1, 2]),
    ("bethe: +inf logits", "bethe", [_w(0, 0, np.inf)], [0, 1, 2]),
    ("bethe: logit -1.5e308", "bethe", [_w(1, 1, -1.5e308)], [0, 1, 2]),
    ("CB: NaN logits", "CB", [NAN_TH, 2], [1, 0, 1, 0]),
    ("CB: +inf logits", "CB", [INF_TH, 2], [1, 0, 1, 0]),
    ("CB: logit 1.5e308", "CB", [BIG_TH, 2], [1, 0, 1, 0]),
    ("CB: k = -1", "CB", [TH, -1], [0, 0, 0, 0]),
    ("CB: k = D + 1", "CB", [TH, 5], [1, 1, 1, 1]),
    ("NChooseK: negative count_probs (the reproducer)", "NChooseK",
     [TH, np.array([-0.5, 1, 0.5, 0, 0])], [1, 0, 0, 0]),
    ("NChooseK: count_probs summing to 2.5", "NChooseK", [TH, np.full(5, 0.5)], [1, 0, 0, 0]),
    ("NChooseK: count_probs summing to 0.5", "NChooseK", [TH, CP / 2], [1, 0, 0, 0]),
    ("NChooseK: NaN in count_probs", "NChooseK", [TH, np.array([np.nan, 0.5, 0.5, 0, 0])],
     [1, 0, 0, 0]),
    ("NChooseK: NaN logits", "NChooseK", [NAN_TH, CP], [1, 0, 0, 0]),
    ("NChooseK: logit 1.5e308", "NChooseK", [BIG_TH, CP], [1, 0, 0, 0]),
    ("Ordinal: rows not simplices", "Ordinal count_probs", [TH, ORD_CP * 2], [0, 1, 2, 0]),
    ("Ordinal: a negative entry", "Ordinal count_probs", [TH, ORD_BAD], [0, 1, 2, 0]),
    ("Ordinal: NaN count_probs", "Ordinal count_probs", [TH, np.where(ORD_CP > 0.25, np.nan,
                                                                      ORD_CP)], [0, 1, 2, 0]),
    ("Ordinal: +inf logits", "Ordinal count_probs", [INF_TH, ORD_CP], [0, 1, 2, 0]),
    ("Ordinal: counts not summing to D", "Ordinal counts", [TH, np.array([1, 1, 1])],
     [0, 1, 2, 0]),
    ("Ordinal: a negative count", "Ordinal counts", [TH, np.array([3, 2, -1])], [0, 1, 0, 0]),
    ("Ordinal: NaN logits", "Ordinal counts", [NAN_TH, np.array([2, 1, 1])], [0, 1, 2, 0]),
    ("PL: NaN utilities", "PL", [_u(1, np.nan), 1.0], [0, 1, 2]),
    ("PL: +inf utilities", "PL", [_u(0, np.inf), 1.0], [0, 1, 2]),
    ("PL: -inf utilities", "PL", [_u(2, -np.inf), 1.0], [0, 1, -1]),
    ("PL: weight -1", "PL", [U3, -1.0], [0, 1, 2]),
    ("PL: weight 1.5", "PL", [U3, 1.5], [0, 1, 2]),
    ("PL: NaN weight", "PL", [U3, np.nan], [0, 1, 2]),
    ("PL: negative length_probs", "PL lp", [U3, np.array([-0.1, 0.4, 0.3, 0.4])], [0, 1, -1]),
    ("PL: length_probs summing to 2", "PL lp", [U3, 2 * LP], [0, 1, -1]),
    ("PL: length_probs of length M", "PL lp", [U3, np.array([0.2, 0.3, 0.5])], [0, 1, -1]),
    ("PL: length_probs of length M + 2", "PL lp", [U3, np.full(5, 0.2)], [0, 1, -1]),
    ("PL: NaN in length_probs", "PL lp", [U3, np.array([np.nan, 0.2, 0.4, 0.4])], [0, 1, -1]),
    ("PL lp: NaN utilities", "PL lp", [_u(1, np.nan), LP], [0, 1, -1]),
    ("PR: NaN logits", "PR", [_w(0, 1, np.nan), 1.0], [0, 1, 2]),
    ("PR: +inf logits", "PR", [_w(2, 2, np.inf), 1.0], [0, 1, 2]),
    ("PR: logit 1.5e308", "PR", [_w(0, 1, 1.5e308), 1.0], [0, 1, 2]),
    ("PR: logit -1.5e308", "PR", [_w(1, 1, -1.5e308), 1.0], [0, 1, 2]),
    ("PR: infeasible (-inf rows)", "PR", [INFEASIBLE, 1.0], [2, 0, 1]),
    ("PR: weight -1", "PR", [W3, -1.0], [0, 1, 2]),
    ("PR: weight 1.5", "PR", [W3, 1.5], [0, 1, 2]),
    ("PR: NaN weight", "PR", [W3, np.nan], [0, 1, 2]),
    ("PR: negative length_probs", "PR lp", [W3, np.array([-0.1, 0.4, 0.3, 0.4])], [0, 1, -1]),
    ("PR: length_probs summing to 2", "PR lp", [W3, 2 * LP], [0, 1, -1]),
    ("PR: length_probs of length M", "PR lp", [W3, np.array([0.2, 0.3, 0.5])], [0, 1, -1]),
    ("PR: length_probs of length M + 2", "PR lp", [W3, np.full(5, 0.2)], [0, 1, -1]),
    ("PR: NaN in length_probs", "PR lp", [W3, np.array([np.nan, 0.2, 0.4, 0.4])], [0, 1, -1]),
    ("PR lp: infeasible (-inf rows)", "PR lp", [INFEASIBLE, LP], [2, 0, -1]),
]


@pytest.mark.parametrize("case", BAD_PARAMS, ids=[c[0] for c in BAD_PARAMS])
def test_draws_refuse_what_logp_refuses(case):
    _, family, params, value = case
    draw, logp, dist_params, op = _compiled(family)
    with pytest.raises(ParameterValueError):
        logp(*params, np.asarray(value))
    with pytest.raises(ValueError):  # numba backend (pm.draw's default)
        draw(*params)
    with pytest.raises(ValueError):  # the Python rng_fn (other backends)
        op.rng_fn(np.random.default_rng(1), *dist_params(*params), None)


GOOD = [
    ("exact", lambda: PermutationExpFamily.dist(W3), [0, 1, 2]),
    ("bethe", lambda: PermutationExpFamily.dist(W3, method="bethe"), [2, 1, 0]),
    ("ConditionalBernoulli", lambda: ConditionalBernoulli.dist(TH, 2), [1, 0, 1, 0]),
    ("NChooseK", lambda: NChooseK.dist(TH, CP), [1, 0, 1, 0]),
    ("OrdinalNChooseK counts", lambda: OrdinalNChooseK.dist(TH, counts=[2, 1, 1]), [0, 1, 2, 0]),
    ("OrdinalNChooseK count_probs", lambda: OrdinalNChooseK.dist(TH, count_probs=ORD_CP),
     [0, 1, 2, 0]),
    ("PlackettLuce", lambda: PlackettLuce.dist(U3), [0, 1, 2]),
    ("PlackettLuce top-k", lambda: PlackettLuce.dist(U3), [0, 1, -1]),
    ("PlackettLuce tied", lambda: PlackettLuce.dist(U3), [0, 0, 2]),
    ("PlackettLuce length_probs top-k", lambda: PlackettLuce.dist(U3, length_probs=LP),
     [-1, 0, -1]),
    ("PartialRanking", lambda: PartialRanking.dist(W3), [2, 0, 1]),
    ("PartialRanking top-k", lambda: PartialRanking.dist(W3), [-1, 0, 1]),
    ("PartialRanking tied", lambda: PartialRanking.dist(W3), [1, 0, 1]),
    ("PartialRanking length_probs top-k", lambda: PartialRanking.dist(W3, length_probs=LP),
     [0, -1, -1]),
    ("OrdinalNChooseK n_levels", lambda: OrdinalNChooseK.dist(TH, n_levels=3), [0, 1, 2, 0]),
]


W_SPREAD = np.array([[0.3, -1.2, 0.8], [1.1, 0.0, -0.4], [-0.7, 0.5, 0.2]])
# (family, distribution, its whole support, renormalize): method="bethe" has exact draws and a
# Bethe (approximate) normaliser, so its logp is compared up to the normaliser
DRAWS_MATCH_LOGP = [
    ("exact", lambda: PermutationExpFamily.dist(W_SPREAD), all_permutations(3), False),
    ("bethe", lambda: PermutationExpFamily.dist(W_SPREAD, method="bethe"), all_permutations(3),
     True),
    ("ConditionalBernoulli", lambda: ConditionalBernoulli.dist(TH, 2), binary_vectors(4, 2),
     False),
    ("NChooseK", lambda: NChooseK.dist(TH, CP), binary_vectors(4), False),
    ("OrdinalNChooseK counts", lambda: OrdinalNChooseK.dist(TH, counts=[2, 1, 1]),
     ordinal_labelings(4, 3), False),
    ("OrdinalNChooseK count_probs", lambda: OrdinalNChooseK.dist(TH, count_probs=ORD_CP),
     ordinal_labelings(4, 3), False),
    ("PlackettLuce", lambda: PlackettLuce.dist(U3), all_permutations(3), False),
    ("PlackettLuce length_probs", lambda: PlackettLuce.dist(U3, length_probs=LP),
     every_top_k_order(3), False),
    ("PartialRanking", lambda: PartialRanking.dist(W_SPREAD), all_permutations(3), False),
    ("PartialRanking length_probs", lambda: PartialRanking.dist(W_SPREAD, length_probs=LP),
     every_top_k_order(3), False),
]


@pytest.mark.parametrize("case", DRAWS_MATCH_LOGP, ids=[c[0] for c in DRAWS_MATCH_LOGP])
def test_draws_match_logp(case):
    """4,000 draws of each family against exp(logp) over its whole support (the probabilities
    sum to 1, except Bethe's), chi-square with small cells pooled; fixed seed, fails at
    p < 1e-4: false-failure rate 1e-4 per family (0.1 % for the ten)."""
    _, make, support, renormalize = case
    pval = check_draws_match_logp(make(), support, n_draws=4000, seed=3,
                                  renormalize=renormalize)
    assert pval > 1e-4


def _shifted(value):
    """Every entry of ``value`` shifted by 0.4, -0.4, 1e-9, NaN or inf: one row per change."""
    bad = []
    for shift in (0.4, -0.4, 1e-9, np.nan, np.inf):
        for i in range(len(value)):
            b = np.asarray(value, dtype=float)
            b[i] += shift
            bad.append(b)
    return np.array(bad)


@pytest.mark.parametrize("case", GOOD, ids=[c[0] for c in GOOD])
def test_non_integer_values_get_minus_inf(case):
    """Every entry of a value in the support shifted by 0.4, -0.4, 1e-9, NaN or inf, on the
    test's backend (tests/conftest.py); every family on numba at once in the next test."""
    _, make, value = case
    rv = make()
    bad = _shifted(value)
    x = pt.matrix("x")
    logp = pytensor.function([x], pm.logp(rv, x))
    assert np.all(np.isfinite(logp(np.asarray([value], dtype=float))))  # integer-valued floats
    assert np.all(logp(bad) == -np.inf)
    # a float constant is checked the same way (a literal list is converted to the variable's
    # integer dtype by PyMC's pm.logp first, as for every discrete PyMC distribution)
    assert pm.logp(rv, pt.as_tensor(bad[:1])).eval() == -np.inf


@pytest.mark.numba  # the default backend's compiled logps, in one graph (one compilation)
def test_non_integer_values_get_minus_inf_on_numba():
    """As above for every family in one numba-compiled function: the values as an input and as a
    float constant, and a value in the support, which keeps a finite logp."""
    inputs, outputs, feeds = [], [], []
    for _, make, value in GOOD:
        rv = make()
        bad = _shifted(value)
        x = pt.matrix()
        inputs.append(x)
        feeds.append(np.concatenate([bad, np.asarray([value], dtype=float)]))
        outputs += [pm.logp(rv, x), pm.logp(rv, pt.as_tensor(bad))]
    results = pytensor.function(inputs, outputs, mode="NUMBA")(*feeds)
    for (name, _, _), as_variable, as_literal in zip(GOOD, results[::2], results[1::2],
                                                     strict=True):
        assert np.all(as_variable[:-1] == -np.inf), name
        assert np.isfinite(as_variable[-1]), name
        assert np.all(as_literal == -np.inf), name


@pytest.mark.parametrize("make", [lambda: PlackettLuce.dist(U3),
                                  lambda: PartialRanking.dist(W3)], ids=["PL", "PR"])
def test_rank_form_non_integer_values_are_not_truncated(make):
    """[0.4, 1, -1] would truncate to the valid top-2 order [0, 1, -1]: it must get -inf."""
    rv = make()
    value = pt.as_tensor(np.array([[0.4, 1, -1], [0.0, 1.0, -1.0], [0.0, 0.0, 2.0]]))
    lp = pm.logp(rv, value).eval()
    assert lp[0] == -np.inf and np.all(np.isfinite(lp[1:]))


# valid parameters of every family of _family
VALID = {"exact": [W3], "bethe": [W3], "CB": [TH, 2], "NChooseK": [TH, CP],
         "Ordinal counts": [TH, np.array([2, 1, 1])], "Ordinal count_probs": [TH, ORD_CP],
         "PL": [U3, 1.0], "PL lp": [U3, LP], "PR": [W3, 1.0], "PR lp": [W3, LP]}


@pytest.mark.parametrize("family", list(VALID))
def test_valid_parameters_still_draw(family):
    """Both sampling paths accept valid parameters, and the draws have a finite logp: the numba
    draw functions of test_draws_refuse_what_logp_refuses (compiled once per family and file)."""
    draw, logp, dist_params, op = _compiled(family)
    params = VALID[family]
    for value in (draw(*params),  # numba backend (pm.draw's default)
                  op.rng_fn(np.random.default_rng(3), *dist_params(*params), None)):
        assert np.isfinite(logp(*params, np.asarray(value)))


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
@pytest.mark.parametrize("make", [lambda w: PlackettLuce.dist(utilities=np.zeros(3), weights=w),
                                  lambda w: PartialRanking.dist(logits=W3, weights=w)],
                         ids=["PL", "PR"])
def test_non_finite_symbolic_weights_refused_by_logp_and_draws(make, mode):
    """The rank-form families' weights (e.g. pm.Data) set to inf or NaN: before, inf passed the
    check ``w >= 0 & w == round(w)``, giving a NaN logp (and gradient), and the draws went on."""
    w = pt.scalar("w")
    d = make(w)
    logp = pytensor.function([w], pm.logp(d, np.array([0, 1, 2])), mode=mode)
    assert logp(2.0) == pytest.approx(-2 * np.log(6.0))
    for bad in (np.inf, np.nan):
        with pytest.raises(ParameterValueError, match="weights must be non-negative integers"):
            logp(bad)
        with pytest.raises(ValueError, match="weights must be non-negative integers"):
            pm.draw(d, givens={w: np.float64(bad)}, mode=mode)



def _no_item_cases():
    """(name, symbolic dist, its parameter, value at M = 0, logp message or None)."""
    W, u, th = pt.matrix("W"), pt.vector("u"), pt.vector("th")
    return [
        ("exact", PermutationExpFamily.dist(W), W, np.zeros((0, 0)), "logits must be a square"),
        ("PR", PartialRanking.dist(W), W, np.zeros((0, 0)), "logits must be a square"),
        ("PL", PlackettLuce.dist(u), u, np.zeros(0), "utilities must have M >= 1 items"),
        ("CB", ConditionalBernoulli.dist(th, 0), th, np.zeros(0), None),
        ("NChooseK", NChooseK.dist(th, np.ones(1)), th, np.zeros(0), None),
        ("Ordinal", OrdinalNChooseK.dist(th, count_probs=np.ones((3, 1))), th, np.zeros(0), None),
    ]


def test_no_item_known_only_at_run_time():
    """M = 0 items, known only at run time (``dist`` refuses a static M = 0), on the Python draw
    path. The permutation families' logp refuses it with their draws' message; before,
    PermutationExpFamily's logp returned 0 while its draws refused M = 0, and PlackettLuce's and
    PartialRanking's logp failed inside PyTensor ("cannot reshape array of size 0"). The count
    families take an empty label vector (count 0, logp 0), as their numba draws did; before,
    their Python draws failed in a reshape."""
    for name, dist, param, value, msg in _no_item_cases():
        y = pt.lvector("y")
        logp = pytensor.function([param, y], pm.logp(dist, y), mode="FAST_COMPILE")
        draw = pytensor.function([param], dist, mode="FAST_COMPILE")
        empty = np.zeros(0, dtype=np.int64)
        if msg is None:
            assert logp(value, empty) == 0.0, name
            assert draw(value).shape == (0,), name
        else:
            with pytest.raises(ParameterValueError, match=msg):
                logp(value, empty)
            with pytest.raises(ValueError, match="M >= 1"):  # the draw paths' own words
                draw(value)


ZERO_OBSERVATIONS = {  # family -> (dist, width of a value)
    "exact": (lambda: PermutationExpFamily.dist(W3), 3),
    "bethe": (lambda: PermutationExpFamily.dist(W3, method="bethe"), 3),
    "PR": (lambda: PartialRanking.dist(W3), 3),
    "PL": (lambda: PlackettLuce.dist(U3), 3),
    "CB": (lambda: ConditionalBernoulli.dist(TH, 2), 4),
    "NChooseK": (lambda: NChooseK.dist(TH, CP), 4),
    "Ordinal": (lambda: OrdinalNChooseK.dist(TH, count_probs=ORD_CP), 4),
}


@pytest.mark.parametrize("family", list(ZERO_OBSERVATIONS))
def test_zero_observations_on_the_python_linker(family):
    """logp of zero observed values is an empty array; before, NChooseK's and OrdinalNChooseK's
    failed on the Python linker (PyTensor's Blockwise and an empty batch; pm_perm.ops._blockwise).
    """
    make, width = ZERO_OBSERVATIONS[family]
    y = pt.lmatrix("y")
    logp = pytensor.function([y], pm.logp(make(), y), mode="FAST_COMPILE")
    assert logp(np.zeros((0, width), dtype=np.int64)).shape == (0,)


@pytest.mark.slow  # a numba graph of its own: 12 s on empty caches (1 s warm); the cause
@pytest.mark.numba  # is the reshape the test above covers on the Python linker
def test_no_item_known_only_at_run_time_on_numba():
    """The same logps on PyTensor's numba backend, where PlackettLuce's and PartialRanking's
    failed with "DimShuffle: Attempting to squeeze axes with size not equal to one". Each call
    gives one family no item and the others three."""
    params = [pt.matrix("W1"), pt.matrix("W2"), pt.vector("u")]
    dists = [PermutationExpFamily.dist(params[0]), PartialRanking.dist(params[1]),
             PlackettLuce.dist(params[2])]
    ys = [pt.lvector(f"y{i}") for i in range(3)]
    logp = pytensor.function([*params, *ys],
                             [pm.logp(d, y) for d, y in zip(dists, ys, strict=True)], mode="NUMBA")
    full = [np.zeros((3, 3)), np.zeros((3, 3)), np.zeros(3)]
    assert np.allclose(logp(*full, *[np.arange(3)] * 3), -np.log(6.0))
    msgs = ["logits must be a square", "logits must be a square", "utilities must have M >= 1"]
    for i, msg in enumerate(msgs):
        values = [np.zeros((0,) * p.ndim) if j == i else full[j] for j, p in enumerate(params)]
        ys_i = [np.zeros(0, dtype=np.int64) if j == i else np.arange(3) for j in range(3)]
        with pytest.raises(ParameterValueError, match=msg):
            logp(*values, *ys_i)
