"""Every kernel of every kernel set against its family's scalar reference.

The references (convt/src/reference.c) define each family's arithmetic: fused
multiply-adds in a documented order.  Sets flagged fused must match them bit
for bit; the others within the rounding bound of their own order.  Calls run
over all row counts 1..MR, odd depths, summation blocks, accumulate on and
off, every alignment of the B offsets, half panels and planted NaN/Inf; output
buffers carry guard zones that must stay untouched.

A family this CPU cannot run is reported as skipped, by name.

Run them alone with ``python -m pytest -m kernels``.
"""

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from convt import _dispatch, _kernels

pytestmark = pytest.mark.kernels

FAMILIES = [family["name"] for family in _kernels.families()]
ACCUMULATIONS = [np.float32, np.float64]
STORAGE = _dispatch.STORAGE
GUARD = 7  # sentinel elements around every output region
SENTINEL = -1234.5


def _family(name):
    family = next(f for f in _dispatch.families() if f.name == name)
    if not family.available:
        pytest.skip(f"kernel family {name!r} needs CPU features this machine lacks: "
                    f"{next(f['requires'] for f in _kernels.families() if f['name'] == name)}")
    return family


def _kernel_set(name, acc):
    return _family(name).kernel_set(acc)


def _kernels_with(name, acc, flag, what):
    """The set of family ``name`` for ``acc``; the test is skipped if its ``flag`` is off."""
    kernels = _kernel_set(name, acc)
    if not kernels.has(flag):
        pytest.skip(f"{name} has no {what} (flag off)")
    return kernels


def _eps(acc):
    return np.finfo(acc).eps / 2


def _guarded(size, acc, rng, fill=True):
    """An array with SENTINEL guards on both sides; returns (whole, inner view)."""
    whole = np.full(size + 2 * GUARD, SENTINEL, dtype=acc)
    inner = whole[GUARD:GUARD + size]
    if fill:
        inner[:] = rng.standard_normal(size)
    return whole, inner


def _assert_guards(whole):
    assert np.all(whole[:GUARD] == SENTINEL) and np.all(whole[-GUARD:] == SENTINEL), \
        "a kernel wrote outside its output"


def _run_guarded(tester, family, out_in, rng, **fields):
    """{name: output} of ``tester`` (a convt._kernels tester) run for the reference and
    ``family`` on guarded copies of ``out_in``; the other fields are the call's."""
    results = {}
    for name in ("reference", family):
        whole, inner = _guarded(out_in.size, out_in.dtype, rng, fill=False)
        inner[:] = out_in
        tester(SimpleNamespace(family=name, out=inner, **fields))
        _assert_guards(whole)
        results[name] = inner.copy()
    return results


def _assert_close(got, expected, bound, fused):
    """Bitwise where the set is fused, else within ``bound``; NaN where the reference has NaN."""
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan), "NaN positions differ from the reference"
    if fused:
        assert np.array_equal(got[~nan], expected[~nan]), (
            f"not bitwise equal to the reference: max difference "
            f"{np.max(np.abs(got[~nan] - expected[~nan]))}")
        return
    infinite = np.isinf(expected)
    assert np.array_equal(got[infinite], expected[infinite])
    finite = ~nan & ~infinite
    error = np.abs(got[finite].astype(np.float64) - expected[finite])
    assert np.all(error <= bound[finite]), f"error {error.max()} above the rounding bound"


def _gemm_spec(rng, acc, rows, width, depth, block, offsets_kind, sibling=0):
    """Operands of one GEMM-family call: A [depth][rows], B rows at `offsets`."""
    lanes = 64 // np.dtype(acc).itemsize
    if offsets_kind == "varying":
        offsets = np.arange(depth) * 37 + rng.integers(0, lanes)
    else:  # every row at the same misalignment
        offsets = np.arange(depth) * (4 * lanes) + offsets_kind
    offsets = offsets.astype(np.intp)
    b = rng.standard_normal(int(offsets.max()) + width + sibling + 1).astype(acc)
    a = rng.standard_normal(depth * rows).astype(acc)
    return SimpleNamespace(a=a, b=b, offsets=offsets, depth=depth, block=block, rows=rows,
                           width=width, sibling=sibling, half=0, storage=0, bias=None,
                           pack_to=None, accumulate=0)


def _plant_non_finite(rng, spec):
    """NaN and Inf at random places of A and B."""
    for array in (spec.a, spec.b):
        picks = rng.choice(array.size, size=2, replace=False)
        array[picks[0]] = np.nan
        array[picks[1]] = rng.choice([np.inf, -np.inf])


def _products_bound(spec, acc, c_in):
    """(n + 3) u (sum |a b| + |c|): a bound for any order of summation."""
    a = np.abs(spec.a.astype(np.float64)).reshape(spec.depth, spec.rows)
    rows = []
    for i in range(spec.rows):
        shift = spec.sibling if i % 2 else 0
        b = np.abs(spec.b.astype(np.float64))[spec.offsets[:, None] + shift + np.arange(spec.width)]
        rows.append(a[:, i] @ b)
    return (spec.depth + 3) * _eps(acc) * (np.array(rows) + np.abs(c_in))


def _call_gemm(spec, family, kernel, ldc, c_in):
    """Run `kernel` of `family` (or the reference) on a guarded C; return C's rows."""
    acc = spec.a.dtype
    rows_span = (spec.rows - 1) * ldc + spec.sibling + spec.width
    whole, inner = _guarded(rows_span, acc, np.random.default_rng(0), fill=False)
    inner[:] = c_in
    spec = SimpleNamespace(**{**spec.__dict__, "family": family, "kernel": kernel, "out": inner,
                              "ldc": ldc})
    _kernels._run_gemm_family(spec)
    _assert_guards(whole)
    return np.array([inner[i * ldc + (spec.sibling if i % 2 else 0):][:spec.width]
                     for i in range(spec.rows)])


DEPTH_BLOCKS = [(1, 32), (3, 1), (24, 24), (17, 7), (100, 32), (257, 64)]


@pytest.mark.parametrize("acc", ACCUMULATIONS)
@pytest.mark.parametrize("kernel", ["gemm", "gemm_pack", "gemm_stream", "half"])
@pytest.mark.parametrize("family", FAMILIES)
def test_gemm_kernels_match_the_reference(family, kernel, acc):
    kernels = _kernel_set(family, acc)
    flag = {"gemm": None, "gemm_pack": _dispatch.SET_PACK, "gemm_stream": _dispatch.SET_STREAM_B,
            "half": _dispatch.SET_HALF}[kernel]
    if flag is not None and not kernels.has(flag):
        pytest.skip(f"{family} has no {kernel} kernels (flag off)")
    width = kernels.nr // 2 if kernel == "half" else kernels.nr
    fused = kernels.has(_dispatch.SET_FUSED)
    rng = np.random.default_rng(1)
    lanes = 64 // np.dtype(acc).itemsize
    for rows in range(1, kernels.mr + 1):
        for depth, block in DEPTH_BLOCKS:
            for accumulate in (0, 1):
                alignment = (rows + depth) % lanes
                for offsets_kind in ("varying", alignment):
                    spec = _gemm_spec(rng, acc, rows, width, depth, block, offsets_kind)
                    spec.accumulate = accumulate
                    ldc = width + 3
                    c_in = rng.standard_normal((rows - 1) * ldc + width).astype(acc)
                    if kernel == "gemm_pack":
                        spec.pack_to = np.full(depth * width, SENTINEL, acc)
                    expected = _call_gemm(spec, "reference", "gemm", ldc, c_in)
                    packed = None if spec.pack_to is None else spec.pack_to.copy()
                    if spec.pack_to is not None:
                        spec.pack_to[:] = SENTINEL
                    got = _call_gemm(spec, family, kernel, ldc, c_in)
                    start = np.array([c_in[i * ldc:i * ldc + width] for i in range(rows)])
                    bound = _products_bound(spec, acc, start if accumulate else 0)
                    _assert_close(got, expected, bound, fused)
                    if packed is not None:
                        assert np.array_equal(spec.pack_to, packed), "packed B rows differ"


def _call_gemm_t(spec, family, ldc, c_in, positions=None):
    """Run gemm_t of `family` (or its reference) on a guarded, transposed C
    (positions x weight rows, row stride ldc); return it as weight rows x positions.
    Position j reads B from ``positions[j]`` (default: j, consecutive positions)."""
    acc = spec.a.dtype
    span = (spec.width - 1) * ldc + spec.rows
    whole, inner = _guarded(span, acc, np.random.default_rng(0), fill=False)
    inner[:] = c_in
    if positions is None:
        positions = np.arange(spec.width)
    _kernels._run_gemm_t(SimpleNamespace(**{**spec.__dict__, "family": family, "out": inner,
                                            "ldc": ldc,
                                            "positions": np.asarray(positions, np.intp)}))
    _assert_guards(whole)
    return np.array([inner[j * ldc:j * ldc + spec.rows] for j in range(spec.width)]).T


def _transposed_positions(family, acc):
    """Positions of the longest full-vector gemm_t call of ``family`` (at least its MR:
    sets may have longer ones, as AVX-512's 14 for the band engine's rows)."""
    positions = _kernels.band_positions(family, np.dtype(acc) == np.float64)
    assert positions >= _kernel_set(family, acc).mr
    return positions


@pytest.mark.parametrize("acc", ACCUMULATIONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_transposed_gemm_kernels_match_the_reference(family, acc):
    """gemm_t against its reference, which is gemm's arithmetic transposed: the
    two orientations give the same value, bit for bit, for every output."""
    kernels = _kernels_with(family, acc, _dispatch.SET_TRANSPOSED, "transposed kernels")
    lanes = kernels.nr // 2
    fused = kernels.has(_dispatch.SET_FUSED)
    rng = np.random.default_rng(11)
    for rows in (lanes, 2 * lanes):
        for positions in range(1, _transposed_positions(family, acc) + 1):
            for depth, block in DEPTH_BLOCKS:
                for accumulate in (0, 1):
                    kind = "varying" if (rows + positions + depth) % 2 else (depth % lanes)
                    spec = _gemm_spec(rng, acc, rows, positions, depth, block, kind)
                    spec.accumulate = accumulate
                    ldc = rows + 3
                    c_in = rng.standard_normal((positions - 1) * ldc + rows).astype(acc)
                    expected = _call_gemm_t(spec, "reference", ldc, c_in)
                    got = _call_gemm_t(spec, family, ldc, c_in)
                    start = np.array([c_in[j * ldc:j * ldc + rows] for j in range(positions)]).T
                    # the reference is gemm's arithmetic: its rows x positions block
                    direct = _call_gemm(spec, "reference", "gemm", positions,
                                        start.reshape(-1))
                    assert np.array_equal(expected, direct, equal_nan=True)
                    bound = _products_bound(spec, acc, start if accumulate else 0)
                    _assert_close(got, expected, bound, fused)


@pytest.mark.parametrize("acc", ACCUMULATIONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_transposed_gemm_kernels_read_each_position_where_it_starts(family, acc):
    """gemm_t's positions need not be consecutive: a call skips a window's margin
    columns (tile rows 7 wide in rows of 9, say), takes them out of order, or
    reads every other one (a stride-2 Conv's row, as the band engine calls it).
    Position j must be exactly the one-position call reading B from positions[j]:
    the same blocked sums, bit for bit, whatever the other positions are."""
    kernels = _kernels_with(family, acc, _dispatch.SET_TRANSPOSED, "transposed kernels")
    lanes = kernels.nr // 2
    rng = np.random.default_rng(13)
    layouts = ("margins", "shuffled", "every other", "every third")
    for rows in (lanes, 2 * lanes):
        for width in range(1, _transposed_positions(family, acc) + 1):
            for layout, (depth, block) in itertools.product(layouts, ((1, 1), (23, 8), (70, 64))):
                spec = _gemm_spec(rng, acc, rows, width, depth, block, "varying")
                spec.b = rng.standard_normal(spec.b.size + 3 * width + 40).astype(acc)
                spec.accumulate = width % 2
                # rows of 7 positions 9 apart (the window's margin skipped), or shuffled,
                # or at a constant stride
                starts = np.array([(q // 7) * 9 + q % 7 for q in range(3, 3 + width)])
                if layout == "shuffled":
                    starts = rng.permutation(starts)
                elif layout != "margins":
                    starts = 5 + (2 if layout == "every other" else 3) * np.arange(width)
                c_in = rng.standard_normal((width - 1) * rows + rows).astype(acc)
                expected = _call_gemm_t(spec, "reference", rows, c_in, starts)
                got = _call_gemm_t(spec, family, rows, c_in, starts)
                for j, start in enumerate(starts):
                    # gemm's reference on B moved to this position's start: one column
                    alone = SimpleNamespace(**{**spec.__dict__, "b": spec.b[start:], "width": 1})
                    direct = _call_gemm(alone, "reference", "gemm", 1,
                                        c_in[j * rows:(j + 1) * rows])
                    assert np.array_equal(expected[:, j], direct[:, 0], equal_nan=True)
                b = np.abs(spec.b.astype(np.float64))
                a = np.abs(spec.a.astype(np.float64)).reshape(depth, rows)
                start_c = c_in.reshape(width, rows).T
                bound = (depth + 3) * _eps(acc) * (
                    a.T @ b[spec.offsets[:, None] + starts[None, :]]
                    + (np.abs(start_c) if spec.accumulate else 0))
                _assert_close(got, expected, bound, kernels.has(_dispatch.SET_FUSED))


@pytest.mark.parametrize("acc", ACCUMULATIONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_transposed_gemm_kernels_propagate_nan_and_inf(family, acc):
    kernels = _kernels_with(family, acc, _dispatch.SET_TRANSPOSED, "transposed kernels")
    rng = np.random.default_rng(12)
    rows = kernels.nr
    for positions in range(1, kernels.mr + 1):
        spec = _gemm_spec(rng, acc, rows, positions, 40, 16, "varying")
        _plant_non_finite(rng, spec)
        spec.accumulate = positions % 2
        c_in = rng.standard_normal((positions - 1) * rows + rows).astype(acc)
        expected = _call_gemm_t(spec, "reference", rows, c_in)
        got = _call_gemm_t(spec, family, rows, c_in)
        assert np.isnan(expected).any()
        start = c_in.reshape(positions, rows).T
        bound = _products_bound(spec, acc, start if spec.accumulate else 0)
        _assert_close(got, expected, bound, kernels.has(_dispatch.SET_FUSED))


@pytest.mark.parametrize("acc", ACCUMULATIONS)
@pytest.mark.parametrize("kernel", ["gemm", "half"])
@pytest.mark.parametrize("family", FAMILIES)
def test_gemm_kernels_propagate_nan_and_inf(family, kernel, acc):
    kernels = _kernel_set(family, acc)
    if kernel == "half" and not kernels.has(_dispatch.SET_HALF):
        pytest.skip(f"{family} has no half kernels")
    width = kernels.nr // 2 if kernel == "half" else kernels.nr
    rng = np.random.default_rng(2)
    for rows in range(1, kernels.mr + 1):
        for trial in range(4):
            spec = _gemm_spec(rng, acc, rows, width, 40, 16, "varying")
            _plant_non_finite(rng, spec)
            spec.accumulate = trial % 2
            c_in = rng.standard_normal((rows - 1) * width + width).astype(acc)
            expected = _call_gemm(spec, "reference", "gemm", width, c_in)
            got = _call_gemm(spec, family, kernel, width, c_in)
            assert np.isnan(expected).any()
            bound = _products_bound(spec, acc, c_in.reshape(rows, width) if spec.accumulate else 0)
            _assert_close(got, expected, bound, kernels.has(_dispatch.SET_FUSED))


@pytest.mark.parametrize("acc", ACCUMULATIONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_pair_kernels_match_the_reference(family, acc):
    kernels = _kernels_with(family, acc, _dispatch.SET_PAIRS, "pair kernels")
    fused = kernels.has(_dispatch.SET_FUSED)
    rng = np.random.default_rng(3)
    for half in (0, 1):
        width = kernels.nr // 2 if half else kernels.nr
        for rows in range(2, kernels.mr + 1, 2):
            for depth, block in DEPTH_BLOCKS:
                for sibling in (1, 5):
                    spec = _gemm_spec(rng, acc, rows, width, depth, block, "varying", sibling)
                    spec.half = half
                    spec.accumulate = depth % 2
                    if depth == 100:
                        _plant_non_finite(rng, spec)
                    ldc = width + sibling + 2
                    c_in = rng.standard_normal((rows - 1) * ldc + sibling + width).astype(acc)
                    expected = _call_gemm(spec, "reference", "pair", ldc, c_in)
                    got = _call_gemm(spec, family, "pair", ldc, c_in)
                    bound = _products_bound(spec, acc, np.abs(c_in).max())
                    _assert_close(got, expected, bound, fused)


def _aligned(count, acc):
    """A zeroed array of ``count`` elements starting on a 64-byte boundary."""
    raw = np.zeros(count + 64, acc)
    skip = (-raw.ctypes.data % 64) // raw.itemsize
    return raw[skip:skip + count]


@pytest.mark.parametrize("acc", ACCUMULATIONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_pack_pair_copies_both_operands_of_every_step(family, acc):
    kernels = _kernels_with(family, acc, _dispatch.SET_PACK_PAIRS, "pack_pair kernel")
    rng = np.random.default_rng(5)
    nr = kernels.nr
    for depth in (1, 2, 7, 64):
        for sibling in (1, 3, nr + 1):
            b = rng.standard_normal(depth * 40 + 2 * nr + sibling).astype(acc)
            offsets = rng.permutation(depth * 40)[:depth].astype(np.intp)  # any alignment
            to = _aligned(2 * depth * nr, acc)
            expected = _aligned(2 * depth * nr, acc)
            for name, out in ((family, to), ("reference", expected)):
                _kernels._run_pack_pair(SimpleNamespace(family=name, width=nr, depth=depth, b=b,
                                                        offsets=offsets, sibling=sibling, to=out))
            assert np.array_equal(to, expected)
            for k, offset in enumerate(offsets):  # and what the reference means
                assert np.array_equal(to[k * nr:(k + 1) * nr], b[offset:offset + nr])
                assert np.array_equal(to[(depth + k) * nr:(depth + k + 1) * nr],
                                      b[offset + sibling:offset + sibling + nr])


@pytest.mark.parametrize("acc", ACCUMULATIONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_transpose_kernels_match_the_reference(family, acc):
    _family(family)
    rng = np.random.default_rng(6)
    shapes = [(1, 1), (3, 5), (8, 8), (4, 4), (16, 24), (17, 9), (9, 33), (85, 16), (40, 1),
              (12, 13), (28, 40), (6, 7), (4, 3), (7, 16), (5, 9),  # AVX2: overlapping, halves
              (20, 150), (33, 131), (8, 64)]  # AVX2: strips of 256 bytes, the last one short
    for rows, cols in shapes:
        for src_pad, dst_pad in ((0, 0), (3, 1), (11, 7)):
            src_stride, dst_stride = cols + src_pad, rows + dst_pad
            src = rng.standard_normal(rows * src_stride).astype(acc)
            src[rng.integers(0, src.size)] = -0.0  # copied exactly, sign included
            for bias in (None, rng.standard_normal(rows).astype(acc)):
                before = rng.standard_normal((cols - 1) * dst_stride + rows).astype(acc)
                results = {}
                for name in (family, "reference"):
                    whole, dst = _guarded(before.size, acc, rng, fill=False)
                    dst[:] = before
                    _kernels._run_transpose(SimpleNamespace(
                        family=name, kernel="transpose", rows=rows, cols=cols, src=src,
                        src_stride=src_stride, dst=dst, dst_stride=dst_stride, bias=bias))
                    _assert_guards(whole)
                    results[name] = dst.copy()
                got = results[family]
                assert np.array_equal(got, results["reference"])
                # what the reference means: the transpose (plus bias), gaps untouched
                expected = before.copy()
                matrix = src.reshape(rows, src_stride)[:, :cols]
                if bias is not None:
                    matrix = matrix + bias[:, None]
                for c in range(cols):
                    expected[c * dst_stride:c * dst_stride + rows] = matrix[:, c]
                assert np.array_equal(got, expected)
                if bias is None:  # exact: signed zeros too
                    assert np.array_equal(np.signbit(got), np.signbit(expected))


def _pair_store_storages(acc):
    return ["float16", "bfloat16", "float32"] if acc == np.float32 else ["float64"]


def _storage_array(name, values):
    """values (float64) rounded to storage `name`, as an array the kernels can address
    (bfloat16 as its uint16 bits, rounded to nearest even by the reference)."""
    if name == "bfloat16":
        bits = np.asarray(values, np.float32).view(np.uint32)
        rounded = bits + 0x7FFF + ((bits >> 16) & 1)
        return (rounded >> 16).astype(np.uint16)
    return np.asarray(values, dtype=name)


def _storage_values(name, array):
    """The values of a storage array as float64 (narrow types may be held as uint16 bits)."""
    if name == "bfloat16":
        return (array.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if name == "float16" and array.dtype == np.uint16:
        array = array.view(np.float16)
    return array.astype(np.float64)


@pytest.mark.parametrize("acc", ACCUMULATIONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_pair_store_kernels_match_the_reference(family, acc):
    kernels = _kernels_with(family, acc, _dispatch.SET_PAIRS, "pair kernels")
    rng = np.random.default_rng(4)
    for storage in _pair_store_storages(acc):
        for half in (0, 1):
            width = kernels.nr // 2 if half else kernels.nr
            for rows in range(2, kernels.mr + 1, 2):
                for depth, block in DEPTH_BLOCKS[::2]:
                    for accumulate, with_bias in ((0, True), (0, False), (1, False)):
                        spec = _gemm_spec(rng, acc, rows, width, depth, block, "varying", 3)
                        spec.half, spec.storage, spec.accumulate = half, STORAGE[storage], accumulate
                        spec.bias = rng.standard_normal(rows // 2).astype(acc) if with_bias else None
                        if depth == 257:
                            _plant_non_finite(rng, spec)
                        ldy = 2 * width + 5
                        start = _storage_array(storage, rng.standard_normal((rows // 2) * ldy))
                        results = {}
                        for name in ("reference", family):
                            y = start.copy()
                            call = SimpleNamespace(**{**spec.__dict__, "family": name,
                                                      "kernel": "pair_store", "out": y, "ldc": ldy})
                            _kernels._run_gemm_family(call)
                            results[name] = _storage_values(storage, y)
                        untouched = np.ones(start.shape, bool)
                        for j in range(rows // 2):
                            untouched[j * ldy:j * ldy + 2 * width] = False
                        assert np.array_equal(results[family][untouched],
                                              _storage_values(storage, start)[untouched])
                        # narrow storages round once from the same float: equal unless the
                        # set is not fused; NaN payloads may differ
                        _assert_close(results[family], results["reference"],
                                      np.full(start.shape, np.inf), kernels.has(_dispatch.SET_FUSED))


@pytest.mark.parametrize("acc", ACCUMULATIONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_sums_that_round_to_negative_zero_keep_their_sign(family, acc):
    """Products too small to represent round to -0, so every block sums to -0: the
    totals must be -0 too (the kernels start them from -0.0, the additive identity,
    where the definition takes the first block sum), over one block and several,
    and +0 when C's rows (+0) start them.  Fused sets only: a set that rounds each
    product first adds -0 to the +0 it starts a block from."""
    kernels = _kernel_set(family, acc)
    if not kernels.has(_dispatch.SET_FUSED):
        pytest.skip(f"{family} rounds products apart (not fused)")
    root = np.sqrt(np.finfo(acc).smallest_subnormal)
    for kernel, sibling in (("gemm", 0), ("pair", 3)):
        if kernel == "pair" and not kernels.has(_dispatch.SET_PAIRS):
            continue
        for depth, block in ((5, 8), (24, 8), (3, 1)):
            for accumulate in (0, 1):
                spec = _gemm_spec(np.random.default_rng(0), acc, 2, kernels.nr, depth, block,
                                  "varying", sibling)
                spec.a[:] = -root / 4
                spec.b[:] = root / 4  # a b: a sixteenth of the least subnormal, -0
                spec.accumulate = accumulate
                ldc = kernels.nr + sibling + 2
                c_in = np.zeros((spec.rows - 1) * ldc + sibling + kernels.nr, acc)
                for name in ("reference", family):
                    got = _call_gemm(spec, name, kernel, ldc, c_in)
                    assert np.all(got == 0)
                    assert np.all(np.signbit(got) != bool(accumulate)), (name, kernel, depth)


@pytest.mark.parametrize("acc", ACCUMULATIONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_row_kernels_match_the_reference(family, acc):
    kernels = _kernel_set(family, acc)
    fused = kernels.has(_dispatch.SET_FUSED)
    rng = np.random.default_rng(5)
    for sources in (1, 2, 5, 16):
        for taps in (1, 2, 3, 5):
            # (5, 60), (3, 40): rows of edges only, several vectors of them
            for in_size, count in ((1, 3), (7, 9), (40, 37), (70, 80), (5, 60), (3, 40)):
                for accumulate in (0, 1):
                    offsets = np.sort(rng.integers(-3, 4, taps)).astype(np.intp)
                    x = [rng.standard_normal(in_size).astype(acc) for _ in range(sources)]
                    w = rng.standard_normal(sources * taps).astype(acc)
                    if sources == 5 and taps == 3:
                        x[1][in_size // 2] = np.nan
                        w[0] = np.inf
                    out_in = rng.standard_normal(count).astype(acc)
                    results = _run_guarded(_kernels._run_row, family, out_in, rng, x=x, w=w,
                                           taps=taps, offsets=offsets, in_size=in_size,
                                           count=count, accumulate=accumulate)
                    magnitude = np.zeros(count)
                    for s in range(sources):
                        for j in range(taps):
                            index = np.arange(count) + offsets[j]
                            inside = (index >= 0) & (index < in_size)
                            magnitude[inside] += abs(float(w[s * taps + j])) * np.abs(
                                x[s][index[inside]].astype(np.float64))
                    bound = (sources * taps + 3) * _eps(acc) * (magnitude + np.abs(out_in))
                    _assert_close(results[family], results["reference"], bound, fused)


@pytest.mark.parametrize("acc", ACCUMULATIONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_stencil_kernels_match_the_reference(family, acc):
    # every band height 1..4, kernel rows and taps reaching past both ends of the
    # input (masked to zeros), rows of edges only, strided output rows (the gaps
    # between them untouched), accumulate on and off, planted NaN and Inf
    kernels = _kernel_set(family, acc)
    fused = kernels.has(_dispatch.SET_FUSED)
    rng = np.random.default_rng(11)
    for rows in (1, 2, 3, 4):
        for kernel_rows, taps in ((1, 1), (3, 3), (2, 5), (7, 2)):
            for in_size, count in ((1, 3), (5, 60), (37, 35), (112, 112), (70, 81)):
                for accumulate in (0, 1):
                    offsets = np.sort(rng.integers(-4, 5, taps)).astype(np.intp)
                    x = [rng.standard_normal(in_size).astype(acc)
                         for _ in range(rows + kernel_rows - 1)]
                    w = rng.standard_normal(kernel_rows * taps).astype(acc)
                    if rows == 3 and taps == 3:
                        x[1][in_size // 2] = np.nan
                        w[-1] = np.inf
                    out_stride = count + 3
                    out_in = rng.standard_normal((rows - 1) * out_stride + count).astype(acc)
                    results = _run_guarded(_kernels._run_stencil, family, out_in, rng, x=x,
                                           w=w, rows=rows, kernel_rows=kernel_rows, taps=taps,
                                           offsets=offsets, in_size=in_size, count=count,
                                           out_stride=out_stride, accumulate=accumulate)
                    written = np.zeros(out_in.size, dtype=bool)
                    magnitude = np.abs(out_in.astype(np.float64)) * accumulate
                    for r in range(rows):
                        written[r * out_stride:r * out_stride + count] = True
                        for i in range(kernel_rows):  # (Inf x 0 bounds are NaN: not checked)
                            padded = np.concatenate([np.zeros(8), np.abs(x[r + i]), np.zeros(
                                count + 8)]).astype(np.float64)
                            for j in range(taps):
                                index = np.arange(count) + offsets[j] + 8
                                with np.errstate(invalid="ignore"):
                                    magnitude[r * out_stride:r * out_stride + count] += abs(
                                        float(w[i * taps + j])) * padded[index]
                    assert np.array_equal(results[family][~written], out_in[~written])
                    bound = (kernel_rows * taps + 3) * _eps(acc) * magnitude
                    _assert_close(results[family], results["reference"], bound, fused)


def test_stencil_reference_pads_with_zeros():
    # the reference itself against a direct NumPy sum over a zero-padded row: the
    # taps outside the input multiply zeros (0 x Inf is NaN, as in the Conv text)
    x = [np.arange(1.0, 6.0), np.arange(10.0, 15.0)]
    w = np.array([1.0, 2.0, 3.0, np.inf])
    out = np.full(9, -1.0)
    _kernels._run_stencil(SimpleNamespace(
        family="reference", x=x, w=w, rows=1, kernel_rows=2, taps=2,
        offsets=np.array([-1, 1], np.intp), in_size=5, count=5, out_stride=5,
        out=out, accumulate=0))
    padded = [np.concatenate([[0.0], row, [0.0]]) for row in x]
    expected = padded[0][0:5] * 1.0 + padded[0][2:7] * 2.0 + padded[1][0:5] * 3.0
    with np.errstate(invalid="ignore"):
        expected = expected + padded[1][2:7] * np.inf
    np.testing.assert_array_equal(out[:5], expected)
    assert np.isnan(out[4]) and np.all(out[5:] == -1.0)


@pytest.mark.parametrize("acc", ACCUMULATIONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_channels_kernels_match_the_reference(family, acc):
    # every channel count up to three vectors and beyond (two-vector, one-vector
    # and tail blocks), gapped and unit steps, NaN and Inf carried through
    kernels = _kernel_set(family, acc)
    fused = kernels.has(_dispatch.SET_FUSED)
    rng = np.random.default_rng(7)
    for channels in list(range(1, 50)) + [64, 67]:
        for count, x_step, out_step in ((1, 0, 0), (5, channels, channels),
                                        (9, 2 * channels + 1, 3 * channels)):
            x_step, out_step = max(x_step, channels), max(out_step, channels)
            x = rng.standard_normal((count - 1) * x_step + channels).astype(acc)
            w = rng.standard_normal(channels).astype(acc)
            if channels > 3 and count > 1:
                x[x_step + 1], w[2] = np.nan, np.inf
            size = (count - 1) * out_step + channels
            out_in = rng.standard_normal(size).astype(acc)
            results = _run_guarded(_kernels._run_channels, family, out_in, rng, x=x, w=w,
                                   count=count, channels=channels, x_step=x_step,
                                   out_step=out_step)
            touched = np.zeros(size, dtype=bool)
            for t in range(count):
                touched[t * out_step:t * out_step + channels] = True
            # gaps between the runs of outputs are left as they were
            assert np.array_equal(results[family][~touched], out_in[~touched])
            magnitude = np.abs(out_in.astype(np.float64))
            for t in range(count):
                magnitude[t * out_step:t * out_step + channels] += np.abs(
                    w.astype(np.float64) * x[t * x_step:t * x_step + channels])
            _assert_close(results[family], results["reference"], 3 * _eps(acc) * magnitude,
                          fused)


@pytest.mark.parametrize("acc", ACCUMULATIONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_run_kernels_match_the_reference(family, acc):
    _kernel_set(family, acc)
    rng = np.random.default_rng(6)
    for kernel in ("interleave", "store_even", "add_bias"):
        for count in list(range(0, 20)) + [31, 64, 67]:
            src = rng.standard_normal(count).astype(acc)
            odd = rng.standard_normal(count).astype(acc)
            if count > 3:
                src[1], odd[2] = np.nan, -np.inf
            size = 2 * count if kernel != "add_bias" else count
            outputs = {}
            for name in ("reference", family):
                whole, inner = _guarded(size, acc, np.random.default_rng(count))
                _kernels._run_runs(SimpleNamespace(
                    family=name, kernel=kernel, acc=acc, src=src, odd=odd, out=inner, raw=None,
                    count=count, bias=0.25, storage=0))
                _assert_guards(whole)
                outputs[name] = inner.copy()
            assert np.array_equal(outputs[family], outputs["reference"], equal_nan=True), kernel


@pytest.mark.parametrize("acc", ACCUMULATIONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_streaming_interleave_matches_the_reference(family, acc):
    """interleave_stream (non-temporal stores where y is 32-byte aligned): the
    reference interleave's values at every alignment of y and every length, and
    nothing written outside y."""
    _kernels_with(family, acc, _dispatch.SET_STREAM_STORES, "streaming stores")
    rng = np.random.default_rng(16)
    lanes = 32 // np.dtype(acc).itemsize
    for shift in range(lanes + 1):  # y at each element offset from a 64-byte boundary
        for count in [0, 1, 3, lanes - 1, lanes, lanes + 1, 2 * lanes + 3, 67]:
            src = rng.standard_normal(count).astype(acc)
            odd = rng.standard_normal(count).astype(acc)
            if count > 3:
                src[1], odd[2] = np.nan, -np.inf
            outputs = {}
            for name in ("reference", family):
                raw = np.full(2 * count + 2 * GUARD + 64, SENTINEL, dtype=acc)
                start = (-raw.ctypes.data % 64) // raw.itemsize + GUARD + shift
                whole = raw[start - GUARD:start + 2 * count + GUARD]
                inner = whole[GUARD:GUARD + 2 * count]
                _kernels._run_runs(SimpleNamespace(
                    family=name, kernel="interleave_stream", acc=acc, src=src, odd=odd,
                    out=inner, raw=None, count=count, bias=0.25, storage=0))
                _assert_guards(whole)
                outputs[name] = inner.copy()
            assert np.array_equal(outputs[family], outputs["reference"], equal_nan=True), \
                (shift, count)


# float32 values that stress the narrow conversions: ties, subnormals, overflow.
def _stress_floats(rng):
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, 65519.99,
                         2.0**-24, 2.0**-25, 3 * 2.0**-26, 6.1e-5, 1 + 2.0**-11, 1 + 3 * 2.0**-11,
                         3.0e38, 3.4028235e38, 1 + 2.0**-8, 1 + 3 * 2.0**-8, 1e-40, -1e-45],
                        np.float32)
    return np.concatenate([specials, rng.standard_normal(300).astype(np.float32) * 1e3,
                           (rng.standard_normal(200) * 1e-6).astype(np.float32)])


@pytest.mark.parametrize("acc", ACCUMULATIONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_storage_conversions_match_the_reference(family, acc):
    _kernel_set(family, acc)
    rng = np.random.default_rng(8)
    bit_patterns = np.arange(2**16, dtype=np.uint16)
    for storage in STORAGE:
        code = STORAGE[storage]
        if storage in ("float16", "bfloat16"):
            raw = bit_patterns
            values = _stress_floats(rng).astype(acc)
        else:
            values = np.concatenate([_stress_floats(rng), rng.standard_normal(50)]).astype(acc)
            raw = values.astype(storage)
        loaded, stored = {}, {}
        for name in ("reference", family):
            out = np.empty(raw.size, acc)
            _kernels._run_runs(SimpleNamespace(family=name, kernel="load", acc=acc, src=None,
                                               odd=None, out=out, raw=raw, count=raw.size,
                                               bias=0.0, storage=code))
            loaded[name] = out
            target = np.zeros(values.size, raw.dtype)
            _kernels._run_runs(SimpleNamespace(family=name, kernel="store", acc=acc, src=values,
                                               odd=None, out=None, raw=target, count=values.size,
                                               bias=0.5, storage=code))
            stored[name] = target
        assert np.array_equal(loaded[family], loaded["reference"], equal_nan=True), storage
        bits_equal = stored[family].view(np.uint8) == stored["reference"].view(np.uint8)
        decoded = _storage_values(storage, stored[family])
        assert np.all(bits_equal.reshape(values.size, -1).all(axis=1) | np.isnan(decoded)), storage
    # the reference itself: float16 exactly as NumPy converts
    halves = np.empty(2**16, np.float32)
    _kernels._run_runs(SimpleNamespace(family="reference", kernel="load", acc=np.float32,
                                       src=None, odd=None, out=halves, raw=bit_patterns,
                                       count=2**16, bias=0.0, storage=STORAGE["float16"]))
    with np.errstate(invalid="ignore"):  # ARM's conversion flags signalling NaNs
        widened = bit_patterns.view(np.float16).astype(np.float32)
    assert np.array_equal(halves, widened, equal_nan=True)
    floats = _stress_floats(rng)
    rounded = np.empty(floats.size, np.uint16)
    _kernels._run_runs(SimpleNamespace(family="reference", kernel="store", acc=np.float32,
                                       src=floats, odd=None, out=None, raw=rounded,
                                       count=floats.size, bias=0.0, storage=STORAGE["float16"]))
    with np.errstate(over="ignore"):  # NumPy warns when it rounds to inf, as it must
        assert np.array_equal(rounded.view(np.float16), floats.astype(np.float16), equal_nan=True)


@pytest.mark.parametrize("family", FAMILIES)
def test_flags_say_which_entries_a_set_has(family):
    for acc in ACCUMULATIONS:
        kernels = _kernel_set(family, acc)
        rng = np.random.default_rng(9)
        for kernel, flag in (("gemm_pack", _dispatch.SET_PACK), ("half", _dispatch.SET_HALF),
                             ("pair", _dispatch.SET_PAIRS), ("gemm_stream", _dispatch.SET_STREAM_B)):
            rows = 2
            spec = _gemm_spec(rng, acc, rows, kernels.nr, 4, 4, "varying", 1)
            spec.pack_to = np.zeros(4 * kernels.nr, acc)
            call = SimpleNamespace(**{**spec.__dict__, "family": family, "kernel": kernel,
                                      "out": np.zeros(4 * kernels.nr + 8, acc), "ldc": kernels.nr})
            if kernels.has(flag):
                _kernels._run_gemm_family(call)
            else:
                with pytest.raises(LookupError):
                    _kernels._run_gemm_family(call)
        spec = _gemm_spec(rng, acc, kernels.nr, 1, 4, 4, "varying")
        call = SimpleNamespace(**{**spec.__dict__, "family": family, "kernel": "gemm_t",
                                  "out": np.zeros(2 * kernels.nr, acc), "ldc": kernels.nr,
                                  "positions": np.zeros(1, np.intp)})
        if kernels.has(_dispatch.SET_TRANSPOSED):
            _kernels._run_gemm_t(call)
        else:
            with pytest.raises(LookupError):
                _kernels._run_gemm_t(call)
        pack = SimpleNamespace(family=family, kernel="pack_pair", rows=0, depth=1, b=np.zeros(2 * kernels.nr + 1, acc),
                               offsets=np.zeros(1, np.intp), sibling=1,
                               to=_aligned(2 * kernels.nr, acc))
        if kernels.has(_dispatch.SET_PACK_PAIRS):
            _kernels._run_pack_pair(pack)
        else:
            with pytest.raises(LookupError):
                _kernels._run_pack_pair(pack)
        # no set has kernels for more rows than its MR
        if kernels.mr < 12:
            spec = _gemm_spec(rng, acc, kernels.mr + 1, kernels.nr, 4, 4, "varying")
            call = SimpleNamespace(**{**spec.__dict__, "family": family, "kernel": "gemm",
                                      "out": np.zeros(16 * kernels.nr, acc), "ldc": kernels.nr})
            with pytest.raises(LookupError):
                _kernels._run_gemm_family(call)
