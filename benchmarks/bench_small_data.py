"""Small ranking data sets: do the default models lose to Plackett-Luce? (issue 53, finding 8)

PRE-REGISTRATION (written 2026-11-29 06:58 UTC, before any held-out figure of the variant below
was computed; the only held-out figures seen before were those of the old defaults, V0):

Data: for seed s = 0..4, M = 15 + s items, n = 40 + 15 s ballots drawn from Plackett-Luce with
utilities u ~ Normal(0, 1) (``pm_perm.preferences.synthetic.simulate_rankings``), in two
settings: complete rankings, and top-k ballots with k uniform on 3..M. 20 % of the ballots held
out (``RankingData.split_ballots(0.2, default_rng(s))``). Score: held-out log-likelihood per
ballot (natural log, ballot length excluded), MAP plug-in. "Within noise": the mean per-ballot
difference (model - PL) is within 2 standard errors of that difference (SE over held-out
ballots), per seed and pooled over the 5 seeds.

Variants:
V0 (the old defaults, reproduced): ``rank_one_model`` with the linear position profile
    ``c_j = (M-1-j)/(M-1)``; ``full_model`` with ``tau ~ HalfNormal(1)`` fitted jointly by
    ``fit_map`` (non-centred joint MAP).
V1 (the variant tested, fixed before seeing its figures):
    rank-one: the fixed position profile is PL's first-order profile ``c_j = H_{M-1-j}``
    (harmonic numbers, ``H_0 = 0``): at equal utilities the derivative of PL's log-probability
    with respect to the utility of the item in position j is ``const - H_M + H_{M-1-j}``, so
    rank-one with this profile agrees with Plackett-Luce to first order in ``u`` (same utility
    scale, same prior).
    full: the same rank-one mean; the deviation scale ``tau`` is not fitted jointly but chosen
    by type-II maximum likelihood: the Laplace estimate of the log evidence
    ``log p(y | tau)`` (``pm_perm.inference.laplace.laplace_log_evidence``) at the MAP of
    ``(u, delta)`` for each ``tau`` on the grid {0} + {2^k / 16, k = 0..6}; ``tau = 0`` is the
    rank-one model exactly.
Irish elections (shared/data/preflib/irish): one 20 % held-out split (seed 0), PL, rank-one
and full (V1); the full model must still beat PL there.
"""
