import numpy as np
import pytest

from pm_perm.learning_to_rank.data import (
    RankingSplit,
    query_level_norm,
    read_letor,
    read_lightgbm,
)

LETOR = """\
2 qid:7 1:0.5 3:1.0 #docid = a
0 qid:7 2:0.25
# a comment line

1 qid:3 1:1 2:2 3:3
0 qid:3 1:4
0 qid:3 3:-1.5 # trailing comment
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


# ---------------------------------------------------------------- LETOR reader


def test_read_letor_small_file(tmp_path):
    split = read_letor(_write(tmp_path, "a.txt", LETOR))
    np.testing.assert_array_equal(
        split.X, [[0.5, 0, 1.0], [0, 0.25, 0], [1, 2, 3], [4, 0, 0], [0, 0, -1.5]]
    )
    assert split.X.dtype == np.float64 and split.y.dtype == np.int64
    np.testing.assert_array_equal(split.y, [2, 0, 1, 0, 0])
    np.testing.assert_array_equal(split.group_ptr, [0, 2, 5])
    np.testing.assert_array_equal(split.qids, [7, 3])  # file order, not sorted
    np.testing.assert_array_equal(split.group_sizes, [2, 3])
    np.testing.assert_array_equal(split.query_index, [0, 0, 1, 1, 1])
    assert (split.n_docs, split.n_queries, split.n_features) == (5, 2, 3)
    assert split.n_dropped_queries == 0


def test_several_files_form_one_split_with_aligned_columns(tmp_path):
    a = _write(tmp_path, "a.txt", "1 qid:1 1:1\n0 qid:1 1:2\n")
    b = _write(tmp_path, "b.txt", "0 qid:2 4:1\n2 qid:2 2:5\n")
    split = read_letor([a, b])
    assert split.n_features == 4
    np.testing.assert_array_equal(split.qids, [1, 2])
    np.testing.assert_array_equal(split.group_ptr, [0, 2, 4])
    np.testing.assert_array_equal(split.X[3], [0, 5, 0, 0])
    # a test split read on its own gets the training width with n_features=
    assert read_letor(a, n_features=split.n_features).X.shape == (2, 4)
    assert read_letor(a).X.shape == (2, 1)


def test_zero_based_feature_ids(tmp_path):
    path = _write(tmp_path, "z.txt", "1 qid:1 0:1 2:3\n0 qid:1 1:2\n")
    with pytest.raises(ValueError, match=r"z.txt:1: feature id 0 .*zero_based=True"):
        read_letor(path)
    np.testing.assert_array_equal(read_letor(path, zero_based=True).X, [[1, 0, 3], [0, 2, 0]])


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("x qid:1 1:0.5", r"bad.txt:2: the label 'x' is not a number"),
        ("1 qid:a 1:0.5", r"bad.txt:2: 'qid:a' is not qid:<integer>"),
        ("1 qid:1 1:0.5 foo", r"bad.txt:2: 'foo' is not <feature id>:<value>"),
        ("1 qid:1 a:0.5", r"bad.txt:2: the feature id in 'a:0.5' is not an integer"),
        ("1 qid:1 1:abc", r"bad.txt:2: the value in '1:abc' is not a number"),
        ("1 qid:1 2:0.5 1:0.3", r"bad.txt:2: feature ids must be strictly increasing"),
        ("1 qid:1 1:nan", r"bad.txt:2: the value in '1:nan' is not finite"),
        ("1.5 qid:1 1:0.5", r"bad.txt:2: the label '1.5' is not a non-negative integer"),
        ("-1 qid:1 1:0.5", r"bad.txt:2: the label '-1' is not a non-negative integer"),
        ("1 1:0.5", r"bad.txt:2: the line has no qid: field .*read_lightgbm"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path, line, match):
    path = _write(tmp_path, "bad.txt", f"0 qid:1 1:0.1\n{line}\n0 qid:1 1:0.2\n")
    with pytest.raises(ValueError, match=match):
        read_letor(path)


def test_file_without_any_qid_points_to_lightgbm_reader(tmp_path):
    path = _write(tmp_path, "noqid.txt", "1 1:0.5\n0 1:0.1\n")
    with pytest.raises(ValueError, match=r"noqid.txt:1: the line has no qid: field"):
        read_letor(path)


def test_feature_beyond_n_features(tmp_path):
    path = _write(tmp_path, "wide.txt", "1 qid:1 1:1 5:1\n0 qid:1 1:2\n")
    with pytest.raises(ValueError, match=r"wide.txt:1: feature id 5 exceeds n_features = 3"):
        read_letor(path, n_features=3)


def test_query_split_into_blocks_and_query_in_two_files(tmp_path):
    path = _write(tmp_path, "split.txt", "1 qid:1 1:1\n0 qid:2 1:1\n0 qid:2 1:3\n0 qid:1 1:2\n")
    with pytest.raises(ValueError, match=r"qid:1 is split into separate blocks .* 0 and 3"):
        read_letor(path)
    a = _write(tmp_path, "a.txt", "1 qid:1 1:1\n0 qid:1 1:2\n")
    b = _write(tmp_path, "b.txt", "1 qid:1 1:1\n0 qid:1 1:2\n")
    with pytest.raises(ValueError, match=r"qid:1 appears in more than one file .*a.txt.*b.txt"):
        read_letor([a, b])


def test_empty_and_missing_files(tmp_path):
    with pytest.raises(ValueError, match="holds no data line"):
        read_letor(_write(tmp_path, "empty.txt", "# only a comment\n"))
    with pytest.raises(FileNotFoundError, match="data file not found"):
        read_letor(tmp_path / "nope.txt")
    with pytest.raises(ValueError, match="no file given"):
        read_letor([])


SINGLES = "1 qid:1 1:1\n0 qid:1 1:2\n1 qid:2 1:1\n0 qid:3 1:5\n2 qid:3 1:6\n0 qid:4 1:1\n"


def test_single_document_queries(tmp_path):
    path = _write(tmp_path, "s.txt", SINGLES)
    with pytest.raises(ValueError, match=r"2 of 4 queries have a single document \(qids 2, 4\)"):
        read_letor(path)
    dropped = read_letor(path, single_doc="drop")
    assert dropped.n_dropped_queries == 2
    np.testing.assert_array_equal(dropped.qids, [1, 3])
    np.testing.assert_array_equal(dropped.y, [1, 0, 0, 2])
    np.testing.assert_array_equal(dropped.X[:, 0], [1, 2, 5, 6])
    kept = read_letor(path, single_doc="keep")
    assert kept.n_queries == 4 and kept.n_dropped_queries == 0
    np.testing.assert_array_equal(kept.group_sizes, [2, 1, 2, 1])
    with pytest.raises(ValueError, match="single_doc must be one of"):
        read_letor(path, single_doc="ignore")
    only_singles = _write(tmp_path, "o.txt", "1 qid:1 1:1\n0 qid:2 1:1\n")
    with pytest.raises(ValueError, match="nothing is left to rank"):
        read_letor(only_singles, single_doc="drop")


# ---------------------------------------------------------------- query-level normalisation


def test_query_level_norm_hand_worked():
    X = np.array([[1.0, 5.0, 0.0], [3.0, 5.0, 2.0], [2.0, 5.0, 4.0], [7.0, -1.0, 0.0]])
    got = query_level_norm(X, [0, 3, 4])
    expected = [[0, 0, 0], [1, 0, 0.5], [0.5, 0, 1], [0, 0, 0]]  # constants -> 0
    np.testing.assert_allclose(got, expected, rtol=0, atol=0)
    with pytest.raises(ValueError, match="group_ptr running from 0 to n_docs"):
        query_level_norm(X, [0, 3])
    with pytest.raises(ValueError, match="strictly increasing"):
        query_level_norm(X, [0, 2, 2, 4])


def test_reader_applies_query_norm_after_dropping(tmp_path):
    path = _write(tmp_path, "s.txt", SINGLES)
    split = read_letor(path, single_doc="drop", query_norm=True)
    np.testing.assert_array_equal(split.X[:, 0], [0, 1, 0, 1])


# ---------------------------------------------------------------- LightGBM reader

LGB = "1 1:0.5 2:1\n0 2:0.25\n2 1:3\n0 1:1\n1 2:2\n"


def test_read_lightgbm_default_group_file(tmp_path):
    data = _write(tmp_path, "rank.train", LGB)
    _write(tmp_path, "rank.train.query", "2\n3\n")
    split = read_lightgbm(data)
    np.testing.assert_array_equal(split.group_ptr, [0, 2, 5])
    np.testing.assert_array_equal(split.qids, [0, 1])
    np.testing.assert_array_equal(split.y, [1, 0, 2, 0, 1])
    np.testing.assert_array_equal(split.X[:, 0], [0.5, 0, 3, 1, 0])


def test_read_lightgbm_several_files_and_explicit_groups(tmp_path):
    a = _write(tmp_path, "a.dat", LGB)
    b = _write(tmp_path, "b.dat", "0 3:1\n1 1:1\n")
    ga = _write(tmp_path, "a.groups", "2\n3\n")
    gb = _write(tmp_path, "b.groups", "2\n")
    split = read_lightgbm([a, b], group_paths=[ga, gb])
    np.testing.assert_array_equal(split.group_ptr, [0, 2, 5, 7])
    np.testing.assert_array_equal(split.qids, [0, 1, 2])
    assert split.n_features == 3
    with pytest.raises(ValueError, match="one group file per data file"):
        read_lightgbm([a, b], group_paths=[ga])


@pytest.mark.parametrize(
    ("groups", "match"),
    [
        (None, r"group file .*rank.train.query not found"),
        ("2\n2\n", r"add up to 4 documents but .*rank.train has 5 lines"),
        ("2\n4\n", r"add up to 6 documents"),
        ("2\nthree\n", r"rank.train.query:2: group sizes must be positive integers.*'three'"),
        ("2\n0\n3\n", r"rank.train.query:2: group sizes must be positive integers"),
        ("\n", r"group file .*rank.train.query is empty"),
    ],
)
def test_bad_group_files(tmp_path, groups, match):
    data = _write(tmp_path, "rank.train", LGB)
    if groups is not None:
        _write(tmp_path, "rank.train.query", groups)
    with pytest.raises(ValueError, match=match):
        read_lightgbm(data)


def test_lightgbm_malformed_line_and_single_docs(tmp_path):
    data = _write(tmp_path, "bad.dat", "1 1:0.5\n0 1:x\n")
    _write(tmp_path, "bad.dat.query", "2\n")
    with pytest.raises(ValueError, match=r"bad.dat:2: the value in '1:x' is not a number"):
        read_lightgbm(data)
    data = _write(tmp_path, "s.dat", LGB)
    _write(tmp_path, "s.dat.query", "1\n4\n")
    with pytest.raises(ValueError, match=r"1 of 2 queries have a single document \(qids 0\)"):
        read_lightgbm(data)
    split = read_lightgbm(data, single_doc="drop")
    assert split.n_dropped_queries == 1 and split.n_docs == 4
    np.testing.assert_array_equal(split.qids, [1])


# ---------------------------------------------------------------- RankingSplit


def _tiny():
    return RankingSplit(
        X=np.arange(10.0).reshape(5, 2), y=[0, 1, 2, 0, 1], group_ptr=[0, 2, 5], qids=[4, 9]
    )


def test_take_queries():
    sub = _tiny().take_queries([1, 0])
    np.testing.assert_array_equal(sub.qids, [9, 4])
    np.testing.assert_array_equal(sub.group_ptr, [0, 3, 5])
    np.testing.assert_array_equal(sub.y, [2, 0, 1, 0, 1])
    np.testing.assert_array_equal(sub.X[:, 0], [4, 6, 8, 0, 2])
    with pytest.raises(ValueError, match=r"query positions in 0..1"):
        _tiny().take_queries([2])


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"X": np.zeros(5)}, "X must be a 2-D"),
        ({"X": np.full((5, 2), np.nan)}, "NaN or infinite"),
        ({"y": [0, 1, 2, 0]}, "non-negative integer labels"),
        ({"y": [0, 1, -2, 0, 1]}, "non-negative integer labels"),
        ({"y": [0.0, 1, 2, 0, 1]}, "non-negative integer labels"),
        ({"group_ptr": [0, 2, 4]}, "from 0 to n_docs = 5"),
        ({"group_ptr": [0, 2, 2, 5], "qids": [1, 2, 3]}, "strictly increasing"),
        ({"qids": [4]}, "qids must be 2 integers"),
        ({"qids": [4, 4]}, "qids must be distinct"),
    ],
)
def test_ranking_split_validation(change, match):
    args = {"X": np.zeros((5, 2)), "y": [0, 1, 2, 0, 1], "group_ptr": [0, 2, 5], "qids": [4, 9]}
    args.update(change)
    with pytest.raises(ValueError, match=match):
        RankingSplit(**args)


# ---------------------------------------------------------------- MQ2008 fold helper


@pytest.mark.data
def test_lightgbm_sample_on_the_real_files(shared_data):
    folder = shared_data / "lightgbm_lambdarank"
    with pytest.raises(ValueError, match="1 of 201 queries have a single document"):
        read_lightgbm(folder / "rank.train")
    train = read_lightgbm(folder / "rank.train", single_doc="keep")
    test = read_lightgbm(folder / "rank.test", n_features=train.n_features)
    assert (train.n_docs, train.n_queries) == (3005, 201)
    assert (test.n_docs, test.n_queries, test.n_features) == (768, 50, train.n_features)
    assert set(np.unique(train.y)) == {0, 1, 2, 3, 4}


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"y": [0, 1, 5000, 0, 1]}, r"y: relevance label 5000 \(row 2\) is above .*= 100"),
        ({"y": np.array([0, 1, 2**63 + 5, 0, 1], dtype=np.uint64)}, r"label 9223372036854775813"),
        ({"n_dropped_queries": -3}, r"n_dropped_queries must be a non-negative integer.*-3"),
        ({"n_dropped_queries": 1.5}, r"n_dropped_queries must be a non-negative integer"),
    ],
)
def test_ranking_split_refuses_huge_labels_and_negative_dropped_count(change, match):
    args = {"X": np.zeros((5, 2)), "y": [0, 1, 2, 0, 1], "group_ptr": [0, 2, 5], "qids": [4, 9]}
    args.update(change)
    with pytest.raises(ValueError, match=match):
        RankingSplit(**args)
    args["y"], args["n_dropped_queries"] = [0, 1, 100, 0, 1], np.int64(2)
    split = RankingSplit(**args)
    assert split.y.max() == 100 and split.n_dropped_queries == 2
    assert type(split.n_dropped_queries) is int


@pytest.mark.parametrize("indices", [[0.7], [True], np.array([1.0, 0.0])])
def test_take_queries_refuses_non_integer_positions(indices):
    with pytest.raises(ValueError, match=r"indices must be .*integer query positions in 0..1"):
        _tiny().take_queries(indices)


def test_integers_beyond_int64_name_the_file_and_line(tmp_path):
    big = "99999999999999999999"
    f = _write(tmp_path, "bigqid.txt", f"1 qid:3 1:0.5\n1 qid:{big} 1:0.5\n0 qid:{big} 1:0.1\n")
    with pytest.raises(ValueError, match=rf"bigqid.txt:2: the query id {big} is outside the int64"):
        read_letor(f)
    f = _write(tmp_path, "bigfid.txt", f"1 qid:3 1:0.5\n0 qid:3 {big}:0.1\n")
    with pytest.raises(ValueError, match=rf"bigfid.txt:2: feature id {big} is too large"):
        read_letor(f)
    f = _write(tmp_path, "lg.txt", "1 1:0.5\n0 1:0.1\n1 1:0.5\n0 1:0.1\n")
    _write(tmp_path, "lg.txt.query", f"2\n{big}000\n")
    with pytest.raises(ValueError, match=rf"lg.txt.query:2: group sizes up to this line add up "
                                         rf"to {big}002 documents but .*lg.txt has 4 lines"):
        read_lightgbm(f)


@pytest.mark.parametrize("n_features", [-1, 0, 2.5, True])
def test_bad_n_features_is_refused(tmp_path, n_features):
    f = _write(tmp_path, "ok.txt", LETOR)
    with pytest.raises(ValueError, match=r"n_features must be a positive integer"):
        read_letor(f, n_features=n_features)
    with pytest.raises(ValueError, match=r"n_features must be a positive integer"):
        read_lightgbm(f, n_features=n_features)


def test_concat_keeps_every_query():
    a = RankingSplit(np.zeros((5, 2)), np.array([0, 1, 0, 2, 1]), np.array([0, 2, 5]),
                     np.array([1, 2]))
    b = RankingSplit(np.ones((3, 2)), np.array([1, 0, 0]), np.array([0, 3]), np.array([7]))
    c = a.concat(b)
    np.testing.assert_array_equal(c.group_ptr, [0, 2, 5, 8])
    np.testing.assert_array_equal(c.qids, [1, 2, 7])
    np.testing.assert_array_equal(c.y, [0, 1, 0, 2, 1, 1, 0, 0])
    assert c.X.shape == (8, 2)
    with pytest.raises(ValueError, match="2 and 3 features"):
        a.concat(RankingSplit(np.ones((3, 3)), np.array([1, 0, 0]), np.array([0, 3]),
                              np.array([7])))
