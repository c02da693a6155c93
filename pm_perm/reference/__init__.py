"""Slow, definitional oracles (enumeration over all permutations / subsets) for tests and
benchmarks."""
