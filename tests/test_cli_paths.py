"""How the command shows a path that does not fit: broken only after separators, a name too
long for a line shortened in the middle, never a line longer than the width."""

from __future__ import annotations

import pytest

from lance_metastore.cli.output import ELLIPSIS, fold_path, path_parts


def test_parts_end_at_separators_and_keep_the_scheme_whole() -> None:
    assert path_parts("s3://bucket//lake/t.lance") == ["s3://", "bucket//", "lake/", "t.lance"]
    assert path_parts("cat$db$t") == ["cat$", "db$", "t"]
    assert "".join(path_parts("/a b/c")) == "/a b/c"


@pytest.mark.parametrize("width", [1, 5, 12, 20, 48, 200])
def test_folded_lines_fit_and_keep_every_name_that_fits(width: int) -> None:
    path = "/tmp/lake/analytics/customer_statistics_by_region.lance"
    lines = fold_path(path, width)
    assert all(len(line) <= width for line in lines)
    for line in lines:
        if ELLIPSIS not in line:
            assert line in path  # a whole run of parts, never a piece of a name
    if len(path) <= width:
        assert lines == [path]


def test_a_name_longer_than_the_line_keeps_its_start_and_end() -> None:
    assert fold_path("/data/customer_statistics.lance", 16) == ["/data/", "customer…s.lance"]
