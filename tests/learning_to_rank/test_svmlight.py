"""The SVMlight/LibSVM parser (pm_perm.learning_to_rank.svmlight) against scikit-learn's."""

import numpy as np
import pytest

from pm_perm.learning_to_rank.svmlight import read_svmlight_files


def _random_file(path, rng, n_lines, width, qid=True, zero=False):
    lines = ["# header comment", ""]
    for i in range(n_lines):
        ids = np.sort(rng.choice(np.arange(0 if zero else 1, width + 1), rng.integers(0, width),
                                 replace=False))
        feats = " ".join(f"{j}:{rng.normal():.17g}" for j in ids)
        head = f"{rng.integers(0, 5)}" + (f" qid:{i // 3 + 10 ** 12}" if qid else "")
        lines.append(f"{head} {feats}" + (" # docid" if i % 4 == 0 else ""))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(("zero_based", "zero", "n_features"), [
    (False, False, None), (False, False, 40), (True, True, None), ("auto", True, None),
    ("auto", False, None), (True, False, 33),
])
@pytest.mark.parametrize("query_id", [True, False])
def test_same_arrays_as_scikit_learn(tmp_path, zero_based, zero, n_features, query_id):
    sk = pytest.importorskip("sklearn.datasets", reason="scikit-learn is the reference here")
    rng = np.random.default_rng(7)
    files = [_random_file(tmp_path / f"f{k}.txt", rng, 30 + k, 12 + 10 * k, zero=zero)
             for k in range(3)]
    ours = read_svmlight_files(files, n_features=n_features, zero_based=zero_based,
                               query_id=query_id)
    ref = sk.load_svmlight_files([str(f) for f in files], n_features=n_features,
                                 zero_based=zero_based, query_id=query_id, dtype=np.float64)
    width = 3 if query_id else 2
    for k, block in enumerate(ours):
        X, y, *q = ref[width * k: width * (k + 1)]
        np.testing.assert_array_equal(block[0], X.toarray())
        np.testing.assert_array_equal(block[1], y)
        assert block[1].dtype == np.int64
        if query_id:
            np.testing.assert_array_equal(block[2], q[0])


@pytest.mark.data
def test_same_arrays_as_scikit_learn_on_mq2008(shared_data):
    sk = pytest.importorskip("sklearn.datasets", reason="scikit-learn is the reference here")
    from pm_perm.datasets.mq2008 import mq2008_folder

    files = sorted(mq2008_folder(shared_data).glob("Fold*/*.txt"))[:3]
    ours = read_svmlight_files(files, query_id=True)
    ref = sk.load_svmlight_files([str(f) for f in files], query_id=True, dtype=np.float64)
    for k, (X, y, q) in enumerate(ours):
        np.testing.assert_array_equal(X, ref[3 * k].toarray())
        np.testing.assert_array_equal(y, ref[3 * k + 1])
        np.testing.assert_array_equal(q, ref[3 * k + 2])


@pytest.mark.parametrize(("line", "reason"), [
    ("1 qid:1 1:2:3 4", "value in '1:2:3' is not a number"),  # two colons, then none
    ("1 qid:1 1: 2:3", "is not a number"),
    ("1 qid:1 :5", "is not an integer"),
    ("1 qid:1 2:1 2:3", "strictly increasing"),
    ("1 qid:1 0:1", "pass zero_based=True"),
    ("1 qid:x 1:1", "is not qid:<integer>"),
    ("1 1:1", "no qid: field"),
    ("a qid:1 1:1", "is not a number"),
])
def test_a_bad_line_is_named(tmp_path, line, reason):
    f = tmp_path / "bad.txt"
    f.write_text(f"0 qid:1 1:0.5\n\n{line}\n")
    with pytest.raises(ValueError, match=rf"bad.txt:3: .*{reason}"):
        read_svmlight_files([f], query_id=True)


@pytest.mark.parametrize("head, line", [(b"", 1), (b"1 qid:1 1:0.5 2:1\n0 qid:1 1:0.1\n", 3)])
def test_nul_bytes_refused_at_once_in_bounded_memory(tmp_path, head, line):
    """issue 53, s.7: a 2 GiB file of NULs (sparse: no disk used) fails within seconds."""
    import time
    import tracemalloc

    path = tmp_path / "zeros.txt"
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(2 * 2**30)
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(ValueError, match=f"line {line}: a NUL byte .0x00. at byte offset "
                                             f"{len(head)}: this is not a text file"):
            read_svmlight_files([path], query_id=True)
    finally:
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert seconds < 5 and peak < 32 * 2**20, (seconds, peak)
