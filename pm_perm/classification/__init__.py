"""Linear classifiers with count priors (n-choose-k, expected top-K gain) and their metrics."""
