#!/usr/bin/env bash
# Regenerate the figures of the documentation (docs/**/*.png) from the scripts that produce them.
#
#   bash scripts/make_figures.sh --list          # what would run, with its cost; runs nothing
#   bash scripts/make_figures.sh NAME ...        # only these figures (names as in --list)
#   bash scripts/make_figures.sh --all           # every figure: HOURS of compute, needs ../shared/data
#
# The Python used is .venv/bin/python (made by scripts/demo.sh or test.sh), or $PYTHON if set.
#
# Each figure is written by its script into outputs/figures/ and then copied into docs/ under
# the name the page uses. Measured costs are those recorded beside each figure in the
# guides and docs/benchmarks.md (2-core machine, one thread). Figures marked [data] need the
# real data in ../shared/data (see its README).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON="$(command -v python3)"
export OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
OUT=outputs/figures

# name | cost | command | produced file:path under docs/ (space-separated)
FIGURES=(
  "getting_started|under 1 min|examples/getting_started_figure.py --out $OUT/getting_started_matching.png|$OUT/getting_started_matching.png:getting_started_matching.png"
  "count_labels|about 1 min|examples/count_labels_figures.py --out $OUT/count_labels|$OUT/count_labels/count_labels_count_probs.png:guide/count_labels_count_probs.png $OUT/count_labels/count_labels_ppc_counts.png:guide/count_labels_ppc_counts.png"
  "count_priors_fig1|about 10 min|examples/multiobject_digits.py --out $OUT/multiobject|$OUT/multiobject/fig1_count_distributions.png:guide/count_priors_fig1.png"
  "count_priors_bayes|about 10 min|examples/multiobject_bayes.py --out $OUT/multiobject_bayes|$OUT/multiobject_bayes/count_probs.png:guide/count_priors_count_probs.png $OUT/multiobject_bayes/ppc_counts.png:guide/count_priors_ppc_counts.png"
  "matching_silhouettes|about 16 min [data]|examples/matching_silhouettes.py --out $OUT/matching_silhouettes|$OUT/matching_silhouettes/hamming_vs_pairs.png:guide/matching_silhouettes.png $OUT/matching_silhouettes/marginals.png:guide/matching_marginals.png"
  "matching_house|about 2 min [data]|examples/matching_house.py --out $OUT/matching_house|$OUT/matching_house/error_by_gap.png:guide/matching_house.png"
  "ranking_top5|about 7 min [data]|-m pm_perm.cli rank --mq2008-fold 1 --fit nuts --prior-sigma 3 --draws 1000 --tune 1000 --chains 4 --json $OUT/nuts_fold1.json --plots $OUT/ranking_nuts|$OUT/ranking_nuts/top5.png:guide/ranking_top5.png"
  "ranking_consistency|about 14 min [data]|examples/ranking_consistency.py --folds 1 2 3 4 5 --sizes 10 30 100 300 0 --repeats 3 --out $OUT/ranking_consistency|$OUT/ranking_consistency.png:guide/ranking_consistency.png"
  "ranking_shapes|about 11 min [data]|examples/ranking_shapes.py --fold 1 --out $OUT/ranking_shapes.png|$OUT/ranking_shapes.png:guide/ranking_shapes.png"
  "rankings_meath|not timed (two Meath MAP fits) [data]|examples/rankings_meath.py --out $OUT/rankings_meath|$OUT/rankings_meath/rankings_meath_ppc_mix.png:guide/rankings_meath_ppc_mix.png $OUT/rankings_meath/rankings_meath_positions.png:guide/rankings_meath_positions.png $OUT/rankings_meath/rankings_meath_blocs.png:guide/rankings_meath_blocs.png"
  "rankings_meath_nuts|NUTS 4 x 1,000 on Meath: about 6 minutes on 2 cores, then 100 replicated elections in about 5 minutes [data]|examples/rankings_meath_nuts.py --out $OUT/rankings_meath_nuts --save $OUT/rankings_meath_nuts/posterior.nc|$OUT/rankings_meath_nuts/rankings_meath_nuts_ppc.png:guide/rankings_meath_nuts_ppc.png $OUT/rankings_meath_nuts/rankings_meath_nuts_consensus.png:guide/rankings_meath_nuts_consensus.png"
  "sbc_rankings|about 7 min|benchmarks/sbc.py --models rankings_full --reps 200 --out $OUT/sbc_rankings|$OUT/sbc_rankings/sbc_rankings_full.png:guide/sbc_rankings_full.png"
  "sbc|hours|benchmarks/sbc.py --models matching ranking nchoosek ordinal --reps 200 --out $OUT/sbc|$OUT/sbc/sbc_matching.png:guide/sbc_matching.png $OUT/sbc/sbc_ranking.png:guide/sbc_ranking.png $OUT/sbc/sbc_nchoosek.png:guide/sbc_nchoosek.png $OUT/sbc/sbc_ordinal.png:guide/sbc_ordinal.png"
  "mallows_potato|about 20 s (5 min on a loaded machine) [data]|examples/mallows_potato.py --figure $OUT/mallows_potato_heat.png|$OUT/mallows_potato_heat.png:guide/mallows_potato_heat.png"
  "sbc_mallows|36 s (MallowsConsensusGibbs, 2026-11-29)|benchmarks/sbc.py --models mallows_latent --reps 200 --out $OUT/sbc_mallows|$OUT/sbc_mallows/sbc_mallows_latent.png:guide/sbc_mallows_latent.png"
)

list() {
  for entry in "${FIGURES[@]}"; do
    IFS='|' read -r name cost cmd files <<<"$entry"
    printf '%-22s %-20s python %s\n' "$name" "$cost" "$cmd"
  done
}

run() {
  local want="$1" entry name cost cmd files pair
  for entry in "${FIGURES[@]}"; do
    IFS='|' read -r name cost cmd files <<<"$entry"
    [ "$want" = "$name" ] || continue
    echo "==> $name ($cost): python $cmd"
    mkdir -p "$OUT"
    # shellcheck disable=SC2086  # the command is a list of words
    "$PYTHON" $cmd
    for pair in $files; do
      cp "${pair%%:*}" "docs/${pair##*:}"
      echo "    docs/${pair##*:}"
    done
    return 0
  done
  echo "unknown figure '$want' (see --list)" >&2
  return 2
}

case "${1:---list}" in
  --list|-l) list ;;
  --all) for entry in "${FIGURES[@]}"; do run "${entry%%|*}"; done ;;
  *) for name in "$@"; do run "$name"; done ;;
esac
