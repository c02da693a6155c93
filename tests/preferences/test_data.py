"""RankingData (pm_perm.preferences.data) and the PrefLib reader/writer
(pm_perm.preferences.preflib)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from pm_perm.preferences import RankingData, read_preflib, write_preflib

HEADER = """# FILE NAME: t.{kind}
# DATA TYPE: {kind}
# NUMBER ALTERNATIVES: 4
# NUMBER VOTERS: {voters}
# NUMBER UNIQUE ORDERS: {orders}
# ALTERNATIVE NAME 1: Ann
# ALTERNATIVE NAME 2: Bob
# ALTERNATIVE NAME 3: Cat
# ALTERNATIVE NAME 4: Dan
"""


def _current(tmp_path, kind, body, voters=None, orders=None, name="t"):
    lines = [ln for ln in body.strip().splitlines()]
    if voters is None:  # lines with a malformed count fail before the totals are checked
        voters = sum(int(c) for c in (ln.split(":")[0] for ln in lines) if c.isdigit())
    path = tmp_path / f"{name}.{kind}"
    path.write_text(HEADER.format(kind=kind, voters=voters, orders=orders or len(lines))
                    + body.strip() + "\n")
    return path


def _as_dict(data):
    return {tuple(r): int(c) for r, c in zip(data.orders.tolist(), data.counts, strict=True)}


# --------------------------------------------------------------------------- reading


def test_current_layout_with_ties_and_top_k(tmp_path):
    path = _current(tmp_path, "toi", "5: 3,{1,4},2\n2: 2\n1: 3,{1,4},2\n4: {1,2,3,4}")
    data = read_preflib(path)
    assert data.kind == "toi" and data.item_names == ("Ann", "Bob", "Cat", "Dan")
    assert data.n_rankings == 12 and data.n_distinct == 3   # the repeated line is aggregated
    np.testing.assert_array_equal(data.orders, [[1, 3, 0, 1], [-1, 0, -1, -1], [0, 0, 0, 0]])
    np.testing.assert_array_equal(data.counts, [6, 2, 4])
    assert data.has_ties and data.max_ranked == 4
    np.testing.assert_array_equal(data.ranked_lengths(), [4, 1, 4])
    assert data.item_lists()[0] == [(2,), (0, 3), (1,)]
    assert data.item_lists(names=True)[1] == [("Bob",)]


def test_old_layout_zero_and_one_based(tmp_path):
    for base in (0, 1):
        p = tmp_path / f"old{base}.toc"
        ids = [base + i for i in range(3)]
        p.write_text(f"3\n{ids[0]},X \n{ids[1]},Y\n{ids[2]},Z\n7,7,2\n"
                     f"4,{ids[2]},{{{ids[0]},{ids[1]}}}\n3,{ids[0]},{ids[1]},{ids[2]}\n")
        data = read_preflib(p)
        assert data.item_names == ("X", "Y", "Z") and data.kind == "toc"
        np.testing.assert_array_equal(data.orders, [[1, 1, 0], [0, 1, 2]])
        np.testing.assert_array_equal(data.counts, [4, 3])


@pytest.mark.parametrize(
    ("kind", "body", "match"),
    [
        ("soi", "2: 1,5", r"line 10: item id 5 is out of range"),
        ("soi", "2: 1,0", r"line 10: item id 0 is out of range"),
        ("soi", "2: 1,2,1", r"line 10: item 1 \('Ann'\) appears more than once"),
        ("toi", "2: 1,{2,1}", r"line 10: item 1 \('Ann'\) appears more than once"),
        ("soi", "1: 1\n2: 1,{2,3}", r"line 11: ties .* strict-order .soi"),
        ("soc", "2: 1,{2,3},4", r"line 10: ties .* strict-order .soc"),
        ("soc", "2: 1,2,3", r"line 10: incomplete order in a .soc file"),
        ("toc", "2: 1,{2,3}", r"line 10: incomplete order in a .toc file"),
        ("soi", "2.5: 1,2", r"line 10: count '2.5' is not an integer"),
        ("soi", "-2: 1,2", r"line 10: count -2 must be a positive integer"),
        ("soi", "0: 1,2", r"line 10: count 0 must be a positive integer"),
        ("soi", "2 1,2", r"line 10: unparseable line"),
        ("soi", "2: 1,x", r"line 10: item id 'x' is not an integer"),
        # digits of other scripts are digits to Python's int(), not to the PrefLib format
        ("soi", "\u0663: 1,2", r"line 10: count '\u0663' is not an integer \(ASCII digits"),
        ("soi", "2: 1,\uff12", r"line 10: item id '\uff12' is not an integer \(ASCII"),
        ("toi", "2: 1,{2,3", r"line 10: unparseable order .*unbalanced"),
        ("toi", "2: 1,{2,{3}}", r"line 10: unparseable order .*unbalanced"),
        ("soi", "2: 1,2,", r"line 10: unparseable order .*trailing"),
        ("toi", "2: {1,2}3", r"line 10: unparseable order .*expected ','"),
        ("toi", "2: 1,{},2", r"line 10: unparseable order '1,\{\},2': empty tie block"),
        ("toi", "2: {}", r"line 10: unparseable order .*empty tie block"),
        ("soi", "99999999999999999999999: 1", r"line 10: count 99999999999999999999999 is too "
                                              r"large \(at most 9223372036854775807\)"),
        ("soi", "9223372036854775807: 1,2\n1: 2", r"line 11: the counts up to this line add up "
                                                 r"to 9223372036854775808 .* int64 limit"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path, kind, body, match):
    path = _current(tmp_path, kind, body)
    with pytest.raises(ValueError, match=match) as err:
        read_preflib(path)
    assert str(path) in str(err.value)


def test_totals_must_add_up(tmp_path):
    with pytest.raises(ValueError, match=r"line 4: # NUMBER VOTERS says 9 but the file has 3"):
        read_preflib(_current(tmp_path, "soi", "2: 1\n1: 2", voters=9))
    with pytest.raises(ValueError, match=r"line 5: # NUMBER UNIQUE ORDERS says 5 .* 2 order"):
        read_preflib(_current(tmp_path, "soi", "2: 1\n1: 2", orders=5))
    old = tmp_path / "old.soi"
    old.write_text("2\n0,A\n1,B\n3,4,1\n3,1,0\n")
    with pytest.raises(ValueError, match=rf"{old}, line 4: sum of counts in the header says 4"):
        read_preflib(old)
    old.write_text("2\n0,A\n1,B\n3,3,1\n3,1,2\n")
    with pytest.raises(ValueError, match=r"line 5: item id 2 is out of range .* ids 0..1"):
        read_preflib(old)


def test_bad_headers(tmp_path):
    p = tmp_path / "a.soi"
    p.write_text("# DATA TYPE: soi\n1: 1\n")
    with pytest.raises(ValueError, match="no '# NUMBER ALTERNATIVES"):
        read_preflib(p)
    p.write_text("# NUMBER ALTERNATIVES: 2\n# ALTERNATIVE NAME 1: A\n1: 1\n")
    with pytest.raises(ValueError, match=r"names are missing for ids \[2\]"):
        read_preflib(p)
    p.write_text("")
    with pytest.raises(ValueError, match="empty"):
        read_preflib(p)
    p.write_text("3\n0,A\n")
    with pytest.raises(ValueError, match="too short"):
        read_preflib(p)


def test_huge_number_of_alternatives_is_not_materialised(tmp_path):
    import tracemalloc

    p = tmp_path / "a.soc"
    names = "# ALTERNATIVE NAME 1: A\n# ALTERNATIVE NAME 2: B\n# ALTERNATIVE NAME 3: C\n"
    for M in (10**6, 10**18):
        p.write_text(f"# DATA TYPE: soc\n# NUMBER ALTERNATIVES: {M}\n{names}2: 1,2,3\n")
        tracemalloc.start()
        try:
            with pytest.raises(ValueError, match=rf"{p}, line 2: header declares NUMBER "
                                                 rf"ALTERNATIVES: {M} but names 3; names are "
                                                 r"missing for ids \[4, 5, .*, 13\] \.\.\."):
                read_preflib(p)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 1_000_000  # nothing of length M was built (10**6 ints: tens of MB)


def test_orders_beyond_the_memory_budget_are_refused_before_they_are_built(tmp_path,
                                                                          monkeypatch):
    """Many alternatives and many distinct orders: the dense table (16 bytes per alternative
    and order while it is read) is refused at the line that would pass the budget, naming its
    size, instead of growing until the machine runs out of memory."""
    import tracemalloc

    M, n = 2000, 400
    names = "".join(f"# ALTERNATIVE NAME {i}: a{i}\n" for i in range(1, M + 1))
    body = "".join(f"1: {i}\n" for i in range(1, n + 1))  # n distinct top-1 orders
    p = tmp_path / "wide.soi"
    p.write_text(f"# DATA TYPE: soi\n# NUMBER ALTERNATIVES: {M}\n# NUMBER VOTERS: {n}\n"
                 f"# NUMBER UNIQUE ORDERS: {n}\n{names}{body}")
    assert read_preflib(p).orders.shape == (n, M)  # 12.8 MB: within the default budget
    monkeypatch.setenv("PM_PERM_MEMORY_BUDGET", "500K")  # room for 16 orders of 2000 (512,000 B)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=rf"{p}, line {4 + M + 17}: 17 distinct orders of "
                                             rf"{M} alternatives up to this line need 531\.25 kiB "
                                             r".*beyond the memory budget \(500\.00 kiB, "
                                             r"PM_PERM_MEMORY_BUDGET\); raise the budget"):
            read_preflib(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000  # stopped near the budget (reading all 400 orders peaks at 13 MB)


def test_reading_peaks_at_two_copies_of_the_orders_table(tmp_path, monkeypatch):
    """What the budget check counts (16 bytes per alternative and order) is what reading takes:
    the distinct orders as bytes, then the array and RankingData's copy of it, with its checks'
    temporaries in chunks (1 MiB here, 32 MiB by default). It was 4.2 copies (np.unique(axis=0)
    and an unchunked sort of the whole table)."""
    import functools
    import tracemalloc

    from pm_perm.preferences import data as rdata

    monkeypatch.setattr(rdata, "_tied_rows",
                        functools.partial(rdata._tied_rows, chunk_bytes=1 << 20))
    M, n = 2000, 400
    names = "".join(f"# ALTERNATIVE NAME {i}: a{i}\n" for i in range(1, M + 1))
    p = tmp_path / "wide.soi"
    p.write_text(f"# NUMBER ALTERNATIVES: {M}\n{names}"
                 + "".join(f"1: {i}\n" for i in range(1, n + 1)))
    read_preflib(p)  # imports and first calls outside the measurement
    tracemalloc.start()
    try:
        data = read_preflib(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert data.orders.shape == (n, M)
    assert peak < 2.4 * data.orders.nbytes, peak / data.orders.nbytes


def test_duplicate_header_lines(tmp_path):
    p = _current(tmp_path, "soi", "2: 1\n1: 2")
    text = p.read_text()
    p.write_text(text.replace("# ALTERNATIVE NAME 4: Dan\n",
                              "# ALTERNATIVE NAME 4: Dan\n# ALTERNATIVE NAME 2: Zed\n"))
    with pytest.raises(ValueError, match=rf"{p}, line 10: alternative id 2 is named twice "
                                         r"\(also on line 7\)"):
        read_preflib(p)
    p.write_text(text.replace("# NUMBER VOTERS: 3\n", "# NUMBER VOTERS: 3\n# NUMBER VOTERS: 4\n"))
    with pytest.raises(ValueError, match=r"line 5: '# NUMBER VOTERS' appears twice \(also on line "
                                         r"4\)"):
        read_preflib(p)


def test_encoding(tmp_path):
    good = _current(tmp_path, "soi", "2: 1,3\n1: 2")
    expected = read_preflib(good)
    bom = tmp_path / "bom.soi"
    for newline in (b"\n", b"\r\n"):
        bom.write_bytes(b"\xef\xbb\xbf" + good.read_bytes().replace(b"\n", newline))
        assert read_preflib(bom) == expected  # a BOM (Windows editors) is dropped
    latin1 = tmp_path / "latin1.soi"
    latin1.write_bytes(good.read_bytes().replace(b"Cat", "Café".encode("latin-1")))
    with pytest.raises(ValueError, match=rf"{latin1}, line 8: byte 0xe9 is not UTF-8 \(byte "
                                         r"offset \d+\); PrefLib files must be UTF-8"):
        read_preflib(latin1)
    latin1.write_bytes(b"\xef\xbb\xbf" + latin1.read_bytes().replace(b"\n", b"\r"))
    with pytest.raises(ValueError, match=r"line 8: byte 0xe9 is not UTF-8"):
        read_preflib(latin1)  # old Mac line ends, after a BOM


def test_counts_beyond_int64_are_refused(tmp_path):
    path = _current(tmp_path, "soi", "9" * 5000 + ": 1", voters=1)
    with pytest.raises(ValueError, match=r"line 10: count 99999999999999999999\.\.\. \(5000 "
                                         r"digits\) is too large"):
        read_preflib(path)  # more digits than Python converts to int
    big = np.iinfo(np.int64).max
    for counts in ([big, 1], np.array([2**63, 1], dtype=np.uint64), [1e19, 1.0]):
        with pytest.raises(ValueError, match=r"counts add up to \d{19,} ballots, more than the "
                                             r"int64 limit"):
            RankingData.from_orders([[0, 1], [1, 0]], counts=counts)
    with pytest.raises(ValueError, match="more than the int64 limit"):
        RankingData(np.array([[0, 1], [1, 0]]), np.array([2**63, 1], dtype=np.uint64),
                    ("a", "b"), "soc")
    with pytest.raises(ValueError, match="more than the int64 limit"):
        RankingData(np.array([[0, 1], [1, 0]]), np.array([2**62, 2**62]), ("a", "b"), "soc")
    data = RankingData.from_orders([[0, 1], [1, 0], [0, 1]], counts=[2**53 + 1, big - 2**54, 2])
    np.testing.assert_array_equal(data.counts, [2**53 + 3, big - 2**54])  # exact, not float
    assert data.n_rankings == big - 2**53 + 3


def test_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="PrefLib file not found"):
        read_preflib(tmp_path / "missing.soi")
    _current(tmp_path, "soi", "1: 1")
    with pytest.raises(IsADirectoryError, match=r"is a directory; pass one PrefLib file .*t.soi"):
        read_preflib(tmp_path)
    (tmp_path / "x.csv").write_text("1\n")
    with pytest.raises(ValueError, match="unknown PrefLib extension '.csv'"):
        read_preflib(tmp_path / "x.csv")


# --------------------------------------------------------------------------- writing


def _random_data(rng, M, n, kind):
    lists = []
    for _ in range(n):
        perm = rng.permutation(M).tolist()
        k = M if kind.endswith("c") else int(rng.integers(0, M + 1))
        items, blocks = perm[:k], []
        while items:
            s = int(rng.integers(1, 4)) if kind.startswith("to") else 1
            blocks.append(tuple(items[:s]) if s > 1 else items[0])
            items = items[s:]
        lists.append(blocks)
    counts = rng.integers(1, 50, size=n)
    return RankingData.from_item_lists(lists, counts, n_items=M,
                                       item_names=[f"item {i}" for i in range(M)], kind=kind)


@pytest.mark.parametrize("kind", ["soc", "soi", "toc", "toi"])
@pytest.mark.parametrize("M", [1, 2, 5, 9])
def test_round_trip_generated(tmp_path, kind, M):
    data = _random_data(np.random.default_rng(M), M, 40, kind)
    path = write_preflib(data, tmp_path / f"g.{kind}")
    back = read_preflib(path)
    assert back == data
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_write_refuses_and_checks(tmp_path):
    data = RankingData.from_item_lists([[0, (1, 2)], [1]], n_items=3)
    assert data.kind == "toi"
    with pytest.raises(ValueError, match=r"cannot write a .soi file: orders\[0\] has ties"):
        write_preflib(data, tmp_path / "x.soi")
    with pytest.raises(ValueError, match=r"cannot write a .toc file: .*not a complete order"):
        write_preflib(data, tmp_path / "x.toc")
    assert not list(tmp_path.iterdir())  # nothing written, no temporary file left
    path = write_preflib(data, tmp_path / "x.toi")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write_preflib(data, path)
    write_preflib(data, path, overwrite=True)
    back = read_preflib(path)
    with pytest.raises(ValueError, match="refusing to overwrite .* read from it"):
        write_preflib(back, path, overwrite=True)
    with pytest.raises(ValueError, match="extension must be one of"):
        write_preflib(data, tmp_path / "x.txt")
    spaced = RankingData.from_item_lists([[0]], n_items=1, item_names=[" a "])
    with pytest.raises(ValueError, match="surrounding spaces"):
        write_preflib(spaced, tmp_path / "y.soi")


def test_write_refuses_line_breaks_and_missing_folders(tmp_path):
    data = RankingData.from_item_lists([[0, 1], [1]], n_items=2)
    for title in ("Meath 2002\nsecond count", "a\rb"):
        with pytest.raises(ValueError, match=r"title .* has a line break, which a PrefLib header "
                                             r"cannot hold; give a title on one line"):
            write_preflib(data, tmp_path / "t.soi", title=title)
    with pytest.raises(ValueError, match=r"file name 'a\\nb.soi' has a line break"):
        write_preflib(data, tmp_path / "a\nb.soi")
    missing = tmp_path / "nope" / "x.soi"
    with pytest.raises(FileNotFoundError, match=rf"cannot write {missing}: its folder "
                                                rf"{missing.parent} does not exist; create it"):
        write_preflib(data, missing)
    (tmp_path / "f").write_text("")
    with pytest.raises(FileNotFoundError, match=r"its folder .*f is not a folder; choose another"):
        write_preflib(data, tmp_path / "f" / "x.soi")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]  # nothing written
    path = write_preflib(data, tmp_path / "t.soi", title="Meath 2002, second count")
    assert "# TITLE: Meath 2002, second count\n" in path.read_text()
    assert read_preflib(path) == data


def test_write_into_a_folder_that_refuses_files_names_the_folder(tmp_path):
    """/proc refuses new files even to root: the message named write_preflib's temporary file
    (``/proc/.x.soi.z65oxmiy.tmp``) instead of the folder."""
    data = RankingData.from_orders(np.array([[0, 1, 2]]), item_names=("A", "B", "C"))
    with pytest.raises(OSError, match=r"^\[Errno \d+\] cannot write /proc/x\.soi: its folder "
                                      r"/proc refuses new files \(.+\); choose another path$"):
        write_preflib(data, "/proc/x.soi")


# --------------------------------------------------------------------------- arrays


def test_from_orders_aggregates_and_validates():
    data = RankingData.from_orders([[0, 1, -1], [0, 1, -1], [1, 0, 2]], counts=[2, 3, 0])
    assert data.n_distinct == 1 and data.n_rankings == 5 and data.kind == "soi"
    assert data.item_names == ("1", "2", "3")
    assert RankingData.from_orders([[1, 0, 2]]).kind == "soc"
    assert RankingData.from_orders([[0, 0, 2]]).kind == "toc"
    with pytest.raises(ValueError, match=r"orders\[1\] = \[0, 2, -1\] is not a valid rank-form"):
        RankingData.from_orders([[0, 1, -1], [0, 2, -1]])
    with pytest.raises(ValueError, match=r"orders\[0\] = \[0, 0, 1\] is not a valid"):
        RankingData.from_orders([[0, 0, 1]])  # the block {0, 1} holds positions 0-1: next is 2
    with pytest.raises(ValueError, match="counts must be non-negative integers"):
        RankingData.from_orders([[0, 1]], counts=[1.5])
    with pytest.raises(ValueError, match="counts must be non-negative integers"):
        RankingData.from_orders([[0, 1]], counts=[-1])
    with pytest.raises(ValueError, match="repeated rows"):
        RankingData(np.array([[0, 1], [0, 1]]), np.array([1, 1]), ("a", "b"), "soc")
    with pytest.raises(ValueError, match=r"orders\[0\] = \[0, -1\] is not a complete order"):
        RankingData(np.array([[0, -1]]), np.array([1]), ("a", "b"), "soc")
    with pytest.raises(ValueError, match=r"lists\[0\] .* item 1 appears more than once"):
        RankingData.from_item_lists([[1, 1]], n_items=2)
    with pytest.raises(ValueError, match=r"item id 4 is out of range"):
        RankingData.from_item_lists([[4]], n_items=2)
    with pytest.raises(ValueError, match="frozen|cannot assign|read-only"):
        data.counts[0] = 7


def test_split_ballots_is_over_ballots():
    rng = np.random.default_rng(3)
    data = _random_data(rng, 6, 300, "soi")
    train, held = data.split_ballots(0.25, rng=11)
    again = data.split_ballots(0.25, rng=11)
    assert again[0] == train and again[1] == held
    total = dict.fromkeys(_as_dict(data), 0)
    for part in (train, held):
        for k, c in _as_dict(part).items():
            total[k] += c
    assert total == _as_dict(data)   # every ballot in exactly one part
    # held-out ballots ~ Binomial(N, 0.25): |z| > 5 has probability 6e-7 (false-failure rate)
    N = data.n_rankings
    assert abs(held.n_rankings - 0.25 * N) < 5 * np.sqrt(N * 0.25 * 0.75)
    assert data.split_ballots(0.0, 1)[1].n_distinct == 0
    with pytest.raises(ValueError, match=r"fraction must be in \[0, 1\]"):
        data.split_ballots(1.5)
    sub = data.subset(data.counts > 25)
    assert sub.n_distinct == int((data.counts > 25).sum())


def test_ballot_folds_partition_the_ballots():
    data = _random_data(np.random.default_rng(5), 5, 200, "toi")
    folds = data.ballot_folds(5, rng=1)
    assert len(folds) == 5
    total = dict.fromkeys(_as_dict(data), 0)
    for train, test in folds:
        assert train.n_rankings + test.n_rankings == data.n_rankings
        for k, c in _as_dict(test).items():
            total[k] += c
    assert total == _as_dict(data)   # every ballot in exactly one test fold
    # each fold's size ~ Binomial(N, 1/5): |z| > 5 has probability 6e-7 per fold
    N = data.n_rankings
    assert all(abs(t.n_rankings - N / 5) < 5 * np.sqrt(N * 0.16) for _, t in folds)
    with pytest.raises(ValueError, match="n_folds must be an integer >= 2"):
        data.ballot_folds(1)


# --------------------------------------------------------------------------- real files


def _preflib_files(shared_data):
    files = sorted(p for p in (shared_data / "preflib").glob("*/*")
                   if p.suffix.lstrip(".") in ("soc", "soi", "toc", "toi"))
    if not files:
        pytest.skip(f"no PrefLib files under {shared_data / 'preflib'}")
    return files


@pytest.mark.data
def test_meath_counts(shared_data):
    path = shared_data / "preflib" / "irish" / "00001-00000003.soi"
    if not path.exists():
        pytest.skip(f"Meath file absent: {path}")
    data = read_preflib(path)
    assert (data.n_items, data.n_rankings, data.n_distinct) == (14, 64081, 25101)
    assert data.item_names[0] == "Johnny Brady F.F." and not data.has_ties


@pytest.mark.data
def test_apa_old_and_current_layouts_agree(shared_data):
    old = shared_data / "preflib" / "apa" / "ED-00028-00000001.soi"
    new = shared_data / "preflib" / "apa_all" / "00028-00000001.soi"
    if not (old.exists() and new.exists()):
        pytest.skip("APA 1998 in both layouts is needed (../shared/data/preflib/apa, apa_all)")
    a, b = read_preflib(old), read_preflib(new)
    assert (a.n_rankings, a.n_distinct) == (18723, 292)
    assert a.item_names == b.item_names and _as_dict(a) == _as_dict(b)


@pytest.mark.data
def test_round_trip_every_real_file(shared_data, tmp_path):
    for path in _preflib_files(shared_data):
        data = read_preflib(path)
        back = read_preflib(write_preflib(data, tmp_path / f"{path.stem}{path.suffix}"))
        assert back == data, path


def test_repeated_row_check_matches_brute_force():
    """RankingData's repeated-row check (a row hash, then exact comparison of rows with equal
    hashes) against comparing every pair, on small tables with many repeats and collisions."""
    from pm_perm.preferences.data import _first_repeated_row

    rng = np.random.default_rng(5)
    for _ in range(300):
        n, M = int(rng.integers(1, 30)), int(rng.integers(1, 6))
        orders = rng.integers(-1, 3, size=(n, M)).astype(np.int64)
        want = next((j for j in range(n) if any(np.array_equal(orders[i], orders[j])
                                                for i in range(j))), None)
        assert _first_repeated_row(orders) == want
    with pytest.raises(ValueError, match="orders contain repeated rows"):
        RankingData(np.array([[0, 1, 2], [1, 0, 2], [0, 1, 2]]), np.ones(3, dtype=np.int64),
                    ("A", "B", "C"), "soc")


# ------------------------------------- issue 53, s.7: a 2 GiB file of NUL bytes fails at once


def _sparse(path, head, size):
    """A file of ``head`` followed by NUL bytes up to ``size`` (sparse: no disk used)."""
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)
    return path


def _timed_peak(fn):
    """``fn()``'s exception, seconds and peak traced memory (bytes)."""
    import time
    import tracemalloc

    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(ValueError) as info:
            fn()
    finally:
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return str(info.value), seconds, peak


@pytest.mark.parametrize("head, line", [
    (b"", 1),
    (b"# NUMBER ALTERNATIVES: 2\n# ALTERNATIVE NAME 1: A\n# ALTERNATIVE NAME 2: B\n3: 1,2\n", 5),
])
def test_nul_bytes_refused_at_once_in_bounded_memory(tmp_path, head, line):
    path = _sparse(tmp_path / "zeros.soi", head, 2 * 2**30)
    msg, seconds, peak = _timed_peak(lambda: read_preflib(path))
    assert msg.startswith(f"{path}, line {line}: a NUL byte (0x00) at byte offset {len(head)}: "
                          "this is not a text file")
    assert seconds < 5 and peak < 32 * 2**20, (seconds, peak)  # main: minutes, 19 GB


def test_file_beyond_the_memory_budget_refused_unless_raised(tmp_path, monkeypatch):
    path = _sparse(tmp_path / "huge.soc", b"# NUMBER ALTERNATIVES: 2\n", 3 * 2**30)
    msg, seconds, peak = _timed_peak(lambda: read_preflib(path))
    assert msg.startswith(f"{path}: the file is 3.00 GiB, more than the memory budget of "
                          "2.00 GiB") and "PM_PERM_MEMORY_BUDGET" in msg
    assert seconds < 5 and peak < 32 * 2**20
    monkeypatch.setenv("PM_PERM_MEMORY_BUDGET", "8G")  # raised: the scan finds the NULs
    msg, seconds, peak = _timed_peak(lambda: read_preflib(path))
    assert msg.startswith(f"{path}, line 2: a NUL byte (0x00) at byte offset 25")
    assert seconds < 5 and peak < 32 * 2**20
