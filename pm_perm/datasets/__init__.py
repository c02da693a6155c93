"""Data sets for the count-prior experiments.

embedded_digits
    Generated images holding 1 to 4 distinct digit classes (Swersky et al. 2012, sec. 5.1),
    from scikit-learn's 8 x 8 digits, and the grid-cell RBM features used with them.
caltech_silhouettes
    Reader and seeded split of Caltech-101 Silhouettes (28 x 28, 101 classes).
"""
