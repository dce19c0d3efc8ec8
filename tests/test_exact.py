"""Exact stacks: per-row panels over pairs of last-axis phases (the pair kernels of
AVX-512 and NEON), for each kernel set with pair kernels this machine runs."""

import numpy as np
import pytest

from convt import ConvTranspose, _dispatch

from _helpers import assert_matches_reference, case_operands, plan_of, run_engine

PAIR_SETS = [family.name for family in _dispatch.families()
             if family.available and family.f32.has(_dispatch.SET_PAIRS)]
pytestmark = pytest.mark.skipif(not PAIR_SETS, reason="no kernel set with pair kernels runs here")
each_pair_set = pytest.mark.parametrize("kernel_set", PAIR_SETS)

# x shape, w shape, attributes; each plans at least one exact stack (rows of the
# two phases in whole half panels: 16 floats with avx512_wide's 32-float panels)
CASES = {
    "k4s2_mg6": ((1, 3, 5, 16), (3, 6, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    "half_panel_mg7": ((2, 4, 7, 48), (4, 7, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    "asymmetric_pads": ((1, 5, 3, 16), (5, 16, 4, 4), dict(strides=(2, 2), pads=(0, 2, 1, 0))),
    "k2s2_padded": ((1, 3, 4, 17), (3, 9, 2, 2), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    "lead_stride3": ((1, 3, 5, 16), (3, 6, 6, 4), dict(strides=(3, 2), pads=(2, 1, 1, 1))),
    "dilated_lead": ((1, 3, 5, 16), (3, 6, 3, 4), dict(strides=(2, 2), dilations=(2, 1),
                                                     pads=(1, 1, 1, 1))),
    "grouped": ((1, 8, 6, 16), (8, 6, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1), group=2)),
    "3d": ((1, 4, 3, 3, 16), (4, 6, 4, 4, 4), dict(strides=(2, 2, 2), pads=(1,) * 6)),
    "1d": ((2, 3, 32), (3, 8, 4), dict(strides=(2,), pads=(1, 1))),
}


@pytest.fixture(autouse=True)
def exact_at_any_depth(monkeypatch):
    """The cases are shallow (a few channels): the AVX2 set would run them on the
    product path (AVX2_EXACT_MIN_DEPTH), so its exact stacks are forced here."""
    monkeypatch.setattr(_dispatch, "AVX2_EXACT_MIN_DEPTH", 0)


# Cases whose plan has no exact stack with some set's blocking (exact stacks need a
# window tile; a window is chosen unless several times larger than the gathered
# taps, _plan.WINDOW_MAX_EXCESS): none at present.
NOT_EXACT = set()


def _exact_stacks(x, w, params, kernel_set):
    _, plan = plan_of(kernel_set, x, w, **params)
    return int(plan.stacks["exact"].sum())


def _operands(name, dtype, with_bias=True):
    return case_operands(CASES, name, dtype, with_bias)


@each_pair_set
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_exact_stacks_match_reference(name, dtype, kernel_set):
    x, w, b, params = _operands(name, dtype, with_bias=name != "k2s2_padded")
    exact = (name, kernel_set, np.dtype(dtype)) not in NOT_EXACT
    assert (_exact_stacks(x, w, params, kernel_set) > 0) == exact, \
        "the case no longer plans an exact stack" if exact else "update NOT_EXACT"
    y = run_engine(f"gemm-{kernel_set}", x, w, b, num_threads=2, **params)
    assert_matches_reference(y, x, w, b, **params)


@each_pair_set
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("name", sorted(CASES))
def test_exact_stacks_across_row_tiles_chunks_and_row_groups(name, dtype, kernel_set, monkeypatch,
                                                           threads_for_any_work):
    # whole grid rows still fit a tile, but tiles hold few rows, input channels
    # come in chunks of one or two, and row blocks split into groups
    monkeypatch.setattr(_dispatch, "MAX_DEPTH", 8)
    monkeypatch.setattr(_dispatch, "OPERAND_BYTES", 4 * 240)
    monkeypatch.setattr(_dispatch, "PRODUCT_BYTES", 4 * 12 * 48)
    x, w, b, params = _operands(name, dtype, with_bias=True)
    assert _exact_stacks(x, w, params, kernel_set) > 0, "the case no longer plans an exact stack"
    for threads in (1, 2, 3):
        y = run_engine(f"gemm-{kernel_set}", x, w, b, num_threads=threads, **params)
        assert_matches_reference(y, x, w, b, **params)
        if threads == 1:
            first = y
        np.testing.assert_array_equal(y, first)


@each_pair_set
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_storing_stacks_take_the_pair_chunk(dtype, kernel_set, monkeypatch):
    # exact stacks storing into y re-plan with the (shorter) pair chunk, whatever the set:
    # forced short here, as avx512_wide's 128 steps are on large layers
    monkeypatch.setattr(_dispatch, "pair_chunk_depth", lambda kernel_set, vector_bytes: 8)
    x, w, b, params = _operands("k4s2_mg6", dtype, with_bias=True)
    x = np.concatenate([x] * 4, axis=1)          # 12 input channels: chunks of 2 (4 taps)
    w = np.concatenate([w] * 4, axis=0)
    _, plan = plan_of(kernel_set, x, w, **params)
    stored = plan.stacks[plan.stacks["store_direct"] == 1]
    assert len(stored) and (stored["chunk"] * stored["taps"] <= 8).all()
    results = [run_engine(f"gemm-{kernel_set}", x, w, b, num_threads=threads, **params)
               for threads in (1, 2)]
    assert_matches_reference(results[0], x, w, b, **params)
    np.testing.assert_array_equal(results[0], results[1])


@each_pair_set
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_packed_pair_panels_change_no_bit(name, dtype, kernel_set, monkeypatch):
    # every full pair panel of a storing stack copied before its row blocks (sets
    # with pack_pair), and no copy: the kernels see the same values in the same order
    # (forced through the decision: where 512-bit FMAs are split, convt never packs)
    family = next(f for f in _dispatch.families() if f.name == kernel_set)
    if not family.f32.has(_dispatch.SET_PACK_PAIRS):
        pytest.skip(f"{kernel_set} has no pack_pair kernel")
    x, w, b, params = _operands(name, dtype, with_bias=True)
    _assert_packing_changes_no_bit("pair_pack_min_blocks", kernel_set, x, w, b, params,
                                   monkeypatch)


def _assert_packing_changes_no_bit(fields, kernel_set, x, w, b, params, monkeypatch):
    """The call with the decision's ``fields`` (a name or a tuple of names) forcing
    packing (1) and forbidding it (0): equal bit for bit, and right."""
    monkeypatch.setattr(_dispatch, "MAX_DEPTH", 8)  # several K chunks as well
    fields = (fields,) if isinstance(fields, str) else fields
    packed, in_place = (run_engine(f"gemm-{kernel_set}", x, w, b, num_threads=2,
                                   overrides={field: min_blocks for field in fields}, **params)
                        for min_blocks in (1, 0))
    assert_matches_reference(packed, x, w, b, **params)
    np.testing.assert_array_equal(packed, in_place)


PACK_SETS = [family.name for family in _dispatch.families()
             if family.available and family.f32.has(_dispatch.SET_PACK)] or [
    pytest.param(None, marks=pytest.mark.skip(reason="no kernel set with B packing runs here"))]


@pytest.mark.parametrize("kernel_set", PACK_SETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", ["k3s1", "k2s2_3d", "k16s8_1d"])
def test_packed_b_panels_change_no_bit(case, dtype, kernel_set, monkeypatch):
    # the first row block of a panel copies the B rows it reads for the next blocks
    # (gemm_pack), or every block reads them in place: the same values, same order
    x_shape, w_shape, params = {
        "k3s1": ((2, 5, 6, 37), (5, 29, 3, 3), dict(pads=(1, 1, 1, 1))),
        "k2s2_3d": ((1, 6, 3, 4, 19), (6, 30, 2, 2, 2), dict(strides=(2, 2, 2))),
        "k16s8_1d": ((2, 7, 21), (7, 27, 16), dict(strides=(8,), pads=(4, 4))),
    }[case]
    rng = np.random.default_rng(11)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[1]).astype(dtype)
    # B read in place from x (k2s2 phases) and from tile buffers (k3s1, k16s8)
    _assert_packing_changes_no_bit(("pack_min_blocks", "buffer_pack_min_blocks"), kernel_set,
                                   x, w, b, params, monkeypatch)


@each_pair_set
@pytest.mark.parametrize("layout", ["contiguous", "channel_slice", "strided_columns"])
def test_exact_stacks_write_into_any_output_layout(layout, kernel_set):
    # exact stacks store into y directly when its rows are contiguous, and go
    # through the product buffer otherwise (the public API only passes C order
    # to the engine; other layouts reach it from internal callers)
    from convt import _engine

    x, w, b, params = _operands("half_panel_mg7", np.float32, with_bias=True)
    layer = ConvTranspose(**params)
    attributes, x, w, b, geometry = layer._prepare(x, w, b)
    n, m, height, width = layer.output_shape_for(x.shape, w.shape)
    if layout == "contiguous":
        y = np.full((n, m, height, width), np.nan, np.float32)
    elif layout == "channel_slice":
        y = np.full((n, 3 * m, height, width), np.nan, np.float32)[:, m:2 * m]
    else:
        y = np.full((n, m, height, 2 * width), np.nan, np.float32)[..., ::2]
    _engine.compute(x, w, b, y, geometry, attributes.group, 2, engine="gemm", backend=kernel_set)
    assert_matches_reference(y, x, w, b, **params)


@each_pair_set
def test_two_phases_of_a_wider_stride_are_not_exact(kernel_set):
    # stride 3, kernel 2: two residues have a tap each and stack, but they are not
    # outputs 2t and 2t + 1, so the interleaving stores must not serve them
    # (found by hypothesis: test_properties.test_wide_layers_match_reference)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 1, 8)).astype(np.float16)
    w = rng.standard_normal((1, 6, 2)).astype(np.float16)
    params = dict(strides=(3,), output_padding=(2,), auto_pad="SAME_LOWER")
    assert _exact_stacks(x, w, params, kernel_set) == 0
    for dtype in (np.float16, np.float32, np.float64):
        y = run_engine(f"gemm-{kernel_set}", x.astype(dtype), w.astype(dtype), None, **params)
        assert_matches_reference(y, x.astype(dtype), w.astype(dtype), None, **params)
