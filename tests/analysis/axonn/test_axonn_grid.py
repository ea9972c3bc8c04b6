"""AxoNN process groups: sizes, membership, disjointness, covering, and AxoNN's own rank layout."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from optcoll.analysis.axonn.grid import DIMS, ParallelGrid, configurations, parse_shape
from optcoll.errors import InputError

GRIDS = [ParallelGrid(2, 3, 2, 2), ParallelGrid(4, 1, 2, 2), ParallelGrid(1, 1, 1, 6), ParallelGrid(2, 2, 2, 2, "DZYX"),
         ParallelGrid(3, 2, 1, 2, "ZXDY")]


def axonn_groups(g_c: int, g_r: int, g_d: int, g_data: int) -> dict[str, set[tuple[int, ...]]]:
    """AxoNN's own enumeration (axonn/communication.py, pipelining 1), written from its formulas:
    the intra-layer group i holds ranks i·G_intra .. +G_intra, reshaped (G_d, G_r, G_c); the data
    group j holds ranks k·G_intra + j."""
    g_intra = g_c * g_r * g_d
    groups: dict[str, set[tuple[int, ...]]] = {dim: set() for dim in DIMS}
    groups["D"] = {tuple(k * g_intra + j for k in range(g_data)) for j in range(g_intra)}
    for i in range(g_data):
        block = np.arange(i * g_intra, (i + 1) * g_intra).reshape(g_d, g_r, g_c)
        for a, b in itertools.product(range(g_d), range(g_r)):
            groups["X"].add(tuple(block[a, b, :].tolist()))  # inner: column groups
        for a, b in itertools.product(range(g_d), range(g_c)):
            groups["Y"].add(tuple(block[a, :, b].tolist()))  # outer: row groups
        for a, b in itertools.product(range(g_r), range(g_c)):
            groups["Z"].add(tuple(block[:, a, b].tolist()))  # depth groups
    return groups


@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g.label()}-{g.order}")
@pytest.mark.parametrize("dim", DIMS)
def test_groups_partition_the_ranks_along_one_coordinate(grid, dim):
    groups = grid.groups(dim)
    p = grid.size(dim)
    assert len(groups) == grid.gpus // p
    assert all(len(g) == p for g in groups)
    members = [r for g in groups for r in g]
    assert sorted(members) == list(range(grid.gpus))  # disjoint and covering
    axis = DIMS.index(dim)
    for group in groups:
        coords = [grid.coords(r) for r in group]
        assert [c[axis] for c in coords] == list(range(p))  # ordered along the dimension
        others = {tuple(c[:axis] + c[axis + 1:]) for c in coords}
        assert len(others) == 1  # only this coordinate varies
        assert all(b - a == grid.stride(dim) for a, b in zip(group, group[1:]))
    assert [g[0] for g in groups] == sorted(g[0] for g in groups)


@pytest.mark.parametrize("shape", [(2, 2, 2, 2), (4, 2, 1, 2), (1, 4, 2, 2), (2, 1, 4, 1), (8, 1, 1, 1)])
def test_default_order_is_axonns_layout(shape):
    grid = ParallelGrid(*shape)
    expected = axonn_groups(*shape)
    for dim in DIMS:
        assert set(grid.groups(dim)) == expected[dim], dim


def test_x_fastest_puts_x_groups_inside_a_node():
    grid = ParallelGrid(4, 2, 2, 2)
    assert grid.groups("X")[:2] == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert (grid.stride("X"), grid.stride("Y"), grid.stride("Z"), grid.stride("D")) == (1, 4, 8, 16)
    assert grid.coords(13) == (1, 1, 1, 0)


def test_configurations_are_every_ordered_factorisation():
    grids = configurations(12)
    shapes = [g.shape for g in grids]
    assert len(shapes) == 40  # 12 = 2^2·3: C(5,3)·C(4,3) ordered 4-factorisations
    assert len(set(shapes)) == len(shapes) and shapes == sorted(shapes)
    assert all(g.gpus == 12 for g in grids)
    assert len(configurations(64)) == 84 and len(configurations(1)) == 1


def test_bad_shapes_name_the_field():
    with pytest.raises(InputError, match="shape"):
        parse_shape("2,2,2")
    with pytest.raises(InputError, match="shape"):
        ParallelGrid(2, 0, 1, 1)
    with pytest.raises(InputError, match="order"):
        ParallelGrid(2, 2, 1, 1, "XYZ")
    with pytest.raises(InputError, match="gpus"):
        configurations(0)
    assert parse_shape(" 4, 2,1 ,8 ") == ParallelGrid(4, 2, 1, 8)
