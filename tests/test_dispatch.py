"""The dispatch point: decisions, plan records, threads, CPU detection rules."""

import types

import numpy as np
import pytest

from convt import Conv, ConvTranspose, _dispatch, _engine, _kernels, _plan, _records, explain

from _helpers import plan_of

# CPUID words of an AVX-512 CPU (leaf 1 ecx: FMA, OSXSAVE, AVX, F16C; leaf 7 ebx:
# AVX2, AVX-512F, BW, VL) and the XCR0 of an OS that saves every state.
LEAF1 = (1 << 12) | (1 << 27) | (1 << 28) | (1 << 29)
LEAF7 = (1 << 5) | (1 << 16) | (1 << 30) | (1 << 31)
XCR0_ALL = 0xE7
XCR0_AVX = 0x07


def _problem(x_shape, w_shape, dtype=np.float32, **params):
    layer = ConvTranspose(**params)
    geometry = layer._geometry_for(x_shape, w_shape)
    out = layer.output_shape_for(x_shape, w_shape)
    return _dispatch.Problem(geometry, x_shape[0], x_shape[1], out[1],
                             params.get("group", 1), np.dtype(dtype))


def test_x86_rules_grant_what_the_cpu_and_the_os_allow():
    decode = _kernels._decode_x86
    assert set(decode(7, LEAF1, LEAF7, 1 << 5, XCR0_ALL, 0)) == {
        "fma", "f16c", "avx2", "avx512f", "avx512bw", "avx512vl", "avx512bf16"}
    # the OS does not save ZMM state: AVX2 only
    assert set(decode(7, LEAF1, LEAF7, 0, XCR0_AVX, 0)) == {"fma", "f16c", "avx2"}
    # macOS enables AVX-512 state on first use: XCR0 lacks it, sysctl says yes
    assert "avx512f" in decode(7, LEAF1, LEAF7, 0, XCR0_AVX, 1)
    # no OSXSAVE, or no YMM state: no AVX at all, whatever the CPU has
    assert decode(7, LEAF1 & ~(1 << 27), LEAF7, 0, XCR0_ALL, 1) == []
    assert decode(7, LEAF1, LEAF7, 0, 0x3, 1) == []
    # leaf 7 absent: no AVX2 even if its bits read as set
    assert set(decode(6, LEAF1, LEAF7, 0, XCR0_ALL, 0)) == {"fma", "f16c"}


def test_families_this_cpu_can_run_are_available():
    features = set(_kernels.cpu_features())
    for family in _kernels.families():
        assert family["available"] == (set(family["requires"]) <= features)
    assert _dispatch.available_kernel_sets()[:2] == ["blas", "portable"]


def test_l1_data_cache_is_what_the_os_reports():
    import os
    import subprocess

    reported = _kernels.l1_data_bytes()
    # 0 (unknown) or a real L1 size: 16 KiB (old x86) to 192 KiB (Apple cores)
    assert reported == 0 or 16 * 1024 <= reported <= 192 * 1024
    if reported and os.path.exists("/usr/bin/getconf"):
        text = subprocess.run(["getconf", "LEVEL1_DCACHE_SIZE"], capture_output=True,
                              text=True).stdout.strip()
        if text.isdigit() and int(text) > 0:
            assert reported == int(text)


def test_l2_cache_is_what_the_os_reports():
    import os
    import subprocess

    reported = _kernels.l2_bytes()
    # 0 (unknown) or a real L2 size: 128 KiB (old cores) to 64 MiB (shared by Apple clusters)
    assert reported == 0 or 128 * 1024 <= reported <= 64 << 20
    if reported and os.path.exists("/usr/bin/getconf"):
        text = subprocess.run(["getconf", "LEVEL2_CACHE_SIZE"], capture_output=True,
                              text=True).stdout.strip()
        if text.isdigit() and int(text) > 0:
            assert reported == int(text)


@pytest.mark.parametrize("l2, budget", [(512 * 1024, 256 * 1024), (1 << 20, 512 * 1024),
                                        (2 << 20, 1 << 20)])
def test_col2im_panels_take_half_of_l2(monkeypatch, l2, budget):
    monkeypatch.setattr(_dispatch, "l2_bytes", lambda: l2)
    assert _dispatch.col2im_panel_bytes() == budget


@pytest.mark.parametrize("l1, depth", [(32 * 1024, 170), (48 * 1024, 256), (128 * 1024, 682),
                                       (4 * 1024, 128), (8 << 20, 2048)])
def test_k_chunks_fill_two_thirds_of_the_l1_data_cache(monkeypatch, l1, depth):
    monkeypatch.setattr(_dispatch, "l1_data_bytes", lambda: l1)
    monkeypatch.setattr(_dispatch, "fma_512_speedup", lambda: 2.0)  # native 512-bit FMAs
    for kernel_set in ("avx512", "avx512_wide", "portable", "neon", "blas"):
        assert _dispatch.chunk_depth(kernel_set) == depth
    if "avx512" in _dispatch.available_kernel_sets():
        problem = _problem((1, 256, 16, 16), (256, 128, 4, 4), strides=(2, 2))
        decision = _dispatch.decide(problem, kernel_set="avx512")
        assert decision.blocking.max_depth == depth


def test_compiled_records_match_the_python_dtypes():
    for name, (size, fields) in _kernels._compiled_records().items():
        assert _records.RECORDS[name].names == tuple(fields)
        assert _records.RECORDS[name].itemsize == size


def test_plans_are_read_only():
    x = np.empty((1, 8, 6, 6), np.float32)
    w = np.empty((8, 4, 4, 4), np.float32)
    _, plan = plan_of("portable", x, w, strides=(2, 2), pads=(1, 1, 1, 1))
    for name in ("stacks", "stack_axes", "phases", "items", "buffer_offsets", "block_starts"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(plan, name).flat[0] = 0


def test_engine_choice_follows_the_work_per_output_and_the_row_length():
    depthwise_k2 = _problem((1, 8, 128, 128), (8, 1, 2, 2), strides=(2, 2), group=8)
    dense = _problem((1, 8, 128, 128), (8, 4, 4, 4), strides=(2, 2))
    short_rows = _problem((1, 8, 16, 16), (8, 1, 2, 2), strides=(2, 2), group=8)
    assert _dispatch.decide(depthwise_k2).engine == "direct"     # rows of 256
    assert _dispatch.decide(dense).engine == "gemm"
    assert _dispatch.decide(short_rows).engine == "gemm"         # rows of 32
    assert "DIRECT_MIN_ROW" in " ".join(_dispatch.decide(short_rows).reasons)


def test_flags_come_from_the_kernel_set(monkeypatch):
    dense = _problem((1, 8, 16, 16), (8, 4, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1))
    portable = _dispatch.decide(dense, kernel_set="portable")
    assert not portable.blocking.exact_stacks and not portable.half_panels
    blas = _dispatch.decide(dense, kernel_set="blas")
    assert blas.blocking.mr == 0 and blas.pack_min_blocks == 0
    if "avx512" in _dispatch.available_kernel_sets():
        avx512 = _dispatch.decide(dense, kernel_set="avx512")
        assert avx512.blocking.exact_stacks and avx512.masked_stores and avx512.half_panels
        strided_y = _dispatch.Problem(**{**dense.__dict__, "y_rows_contiguous": False})
        assert not _dispatch.decide(strided_y, kernel_set="avx512").blocking.store_direct


def test_unavailable_or_unknown_kernel_sets_are_refused():
    dense = _problem((1, 8, 16, 16), (8, 4, 4, 4), strides=(2, 2))
    with pytest.raises(ValueError, match="cannot run on this machine"):
        _dispatch.decide(dense, kernel_set="no-such-set")
    with pytest.raises(ValueError, match="CONVT_GEMM_BACKEND='nope' cannot be used here"):
        _dispatch.decide(dense, environ={"CONVT_GEMM_BACKEND": "nope"})


def test_tiny_problems_stay_on_one_thread(monkeypatch):
    monkeypatch.setattr(_dispatch, "MIN_MULTIPLY_ADDS_PER_THREAD", 1 << 22)
    tiny = _problem((1, 64, 8, 8), (64, 32, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1))
    large = _problem((1, 64, 64, 64), (64, 32, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1))
    assert _dispatch.resolve_threads(8, 100, tiny.multiply_adds()) == 1
    assert _dispatch.resolve_threads(8, 100, large.multiply_adds()) == 8
    assert _dispatch.resolve_threads(8, 3, large.multiply_adds()) == 3


def test_small_layers_are_cut_into_work_items_for_every_thread():
    # 1 x 64 -> 32 channels, 32x32, k4 s2 p1 was a single work item
    x = np.empty((1, 64, 32, 32), np.float32)
    w = np.empty((64, 32, 4, 4), np.float32)
    for kernel_set in _dispatch.available_kernel_sets():
        _, plan = plan_of(kernel_set, x, w, strides=(2, 2), pads=(1, 1, 1, 1))
        assert len(plan.items) >= 4, kernel_set


def test_explain_reports_the_decision():
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1))
    report = explain(layer, (1, 64, 32, 32), (64, 32, 4, 4), np.float32)
    text = str(report)
    assert report.decision.engine == "gemm"
    assert f"kernel set {report.decision.kernel_set}" in text
    assert "stack 0:" in text and "work items" in text
    direct = explain(ConvTranspose(strides=(2,)), (1, 1, 100), (1, 1, 2), np.float64)
    assert direct.decision.engine == "direct" and "output rows" in str(direct)


def test_explain_matches_what_apply_runs(monkeypatch):
    # the decision explain shows is the one compute takes for C-contiguous arrays
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1))
    x = np.ones((1, 16, 8, 8), np.float32)
    w = np.ones((16, 8, 4, 4), np.float32)
    seen = []
    original = _engine.execution
    monkeypatch.setattr(_engine, "execution",
                        lambda *args, **kw: seen.append(original(*args, **kw)) or seen[-1])
    layer.apply(x, w)
    assert seen[0].decision == explain(layer, x.shape, w.shape, x.dtype).decision


def test_the_wide_avx512_set_serves_large_layers_with_long_rows(monkeypatch):
    # the rule itself, on any machine: as if both AVX-512 sets ran here
    monkeypatch.setattr(_dispatch, "available_kernel_sets",
                        lambda: ["blas", "portable", "avx2", "avx512_wide", "avx512"])
    monkeypatch.setattr(_dispatch, "preferred_kernel_set", lambda: "avx512")
    monkeypatch.setattr(_dispatch, "fma_512_speedup", lambda: 2.0)

    def chosen(x_shape, w_shape, **params):
        return _dispatch._choose_kernel_set(_problem(x_shape, w_shape, **params), "gemm",
                                            None, {})[0]

    # plain GEMM: 115 M multiply-adds on 56-wide rows, against 2 M on 8-wide ones
    assert chosen((1, 64, 56, 56), (64, 64, 3, 3), pads=(1, 1, 1, 1)) == "avx512_wide"
    assert chosen((1, 64, 8, 8), (64, 64, 3, 3), pads=(1, 1, 1, 1)) == "avx512"
    # rows shorter than WIDE_MIN_POSITIONS stay narrow whatever the work
    assert chosen((1, 320, 8, 12, 12), (320, 256, 1, 2, 2), strides=(1, 2, 2)) == "avx512"
    # exact-stack layers (k4s2 in 2-D) need WIDE_MIN_WORK_PAIRED
    k4s2 = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    assert chosen((1, 64, 64, 64), (64, 32, 4, 4), **k4s2) == "avx512"           # 134 M
    assert chosen((1, 256, 64, 64), (256, 128, 4, 4), **k4s2) == "avx512_wide"   # 2.1 G
    # a 1-D k4s2 layer has no exact stacks: the plain rule
    assert chosen((4, 128, 2048), (128, 64, 4), strides=(2,), pads=(1, 1)) == "avx512_wide"
    # shallow reductions keep AVX2 over few output channels, an explicit request wins
    assert chosen((1, 4, 256, 256), (4, 4, 4, 4), **k4s2) == "avx2"
    assert chosen((1, 2, 64, 64, 64), (2, 16, 3, 3, 3), pads=(1,) * 6) == "avx2"  # depth 54
    # ...and leave it over AVX512_SHALLOW_MIN_OUTPUTS: a vocoder's 1 -> 512, k10 s5
    # (2 taps per phase, depth 2), a 1x1 over 16 channels into 96
    assert chosen((1, 1, 3200), (1, 512, 10), strides=(5,)) == "avx512"
    assert chosen((1, 16, 14, 14), (16, 96, 1, 1)) == "avx512"
    assert chosen((1, 16, 14, 14), (16, 48, 1, 1)) == "avx2"
    assert _dispatch._choose_kernel_set(_problem((1, 64, 56, 56), (64, 64, 3, 3)), "gemm", None,
                                        {_dispatch.KERNEL_SET_VARIABLE: "avx512"})[0] == "avx512"


def test_the_wide_avx512_set_needs_native_512_bit_fmas(monkeypatch):
    # where a core splits 512-bit FMAs (Zen 4), the 12 x 16 set is FMA-bound already
    monkeypatch.setattr(_dispatch, "available_kernel_sets",
                        lambda: ["blas", "portable", "avx2", "avx512_wide", "avx512"])
    monkeypatch.setattr(_dispatch, "preferred_kernel_set", lambda: "avx512")
    large = _problem((1, 256, 64, 64), (256, 128, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1))
    for speedup, expected in ((1.0, "avx512"), (1.49, "avx512"), (1.5, "avx512_wide"),
                              (2.0, "avx512_wide")):
        monkeypatch.setattr(_dispatch, "fma_512_speedup", lambda: speedup)
        assert _dispatch._choose_kernel_set(large, "gemm", None, {})[0] == expected


def test_col2im_on_few_positions_takes_the_wide_avx512_set(monkeypatch):
    # the rule itself, on any machine: both AVX-512 sets, 512-bit FMAs split or not
    monkeypatch.setattr(_dispatch, "available_kernel_sets",
                        lambda: ["blas", "portable", "avx2", "avx512_wide", "avx512"])
    monkeypatch.setattr(_dispatch, "preferred_kernel_set", lambda: "avx512")
    k4s2 = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    for speedup in (1.0, 2.0):
        monkeypatch.setattr(_dispatch, "fma_512_speedup", lambda: speedup)

        def chosen(x_shape, w_shape, **params):
            problem = _problem(x_shape, w_shape, **params)
            name = _dispatch._choose_kernel_set(problem, "gemm", None, {})[0]
            routed = _dispatch.col2im_route(problem, types.SimpleNamespace(engine="gemm",
                                                                           kernel_set=name))
            return name, routed

        # DCGAN's first layers (16 and 64 positions) and a 1-D k16s8 on 16 positions
        assert chosen((1, 1024, 4, 4), (1024, 512, 4, 4), **k4s2) == ("avx512_wide", True)
        assert chosen((1, 512, 8, 8), (512, 256, 4, 4), **k4s2) == ("avx512_wide", True)
        assert chosen((1, 1024, 16), (1024, 512, 16), strides=(8,), pads=(4, 4)) == (
            "avx512_wide", True)
        # col2im over 144 positions: the set the other rules choose (12-row blocks)
        assert chosen((1, 512, 12, 12), (512, 256, 4, 4), **k4s2) == ("avx512", True)
        # not col2im (256 KiB of weights): the other rules (rows of 8 are short)
        assert chosen((1, 128, 8, 8), (128, 32, 4, 4), **k4s2) == ("avx512", False)
    # an explicit request wins
    assert _dispatch._choose_kernel_set(_problem((1, 1024, 4, 4), (1024, 512, 4, 4), **k4s2),
                                        "gemm", None,
                                        {_dispatch.KERNEL_SET_VARIABLE: "avx512"})[0] == "avx512"


@pytest.mark.parametrize("kernel_set, speedup, depth, pair_depth",
                         [("avx512", 0.0, 170, 170), ("avx512", 1.0, 1365, 1365),
                          ("avx512_wide", 1.2, 1365, 1365), ("avx512", 1.9, 170, 170),
                          ("avx512", 2.1, 170, 170), ("avx2", 0.0, 170, 1365),
                          ("avx2", 1.0, 1365, 1365), ("avx2", 2.1, 170, 1365),
                          ("neon", 0.0, 170, 170)])
def test_k_chunks_are_sized_to_several_l1s_where_the_kernels_read_b_from_l2(
        monkeypatch, kernel_set, speedup, depth, pair_depth):
    # 32 KiB of L1, 8 times that: for every stack where 512-bit FMAs are split
    # (speedup below 1.5, above 0), for the exact stacks of the AVX2 kernels everywhere
    monkeypatch.setattr(_dispatch, "l1_data_bytes", lambda: 32 * 1024)
    monkeypatch.setattr(_dispatch, "fma_512_speedup", lambda: speedup)
    assert _dispatch.chunk_depth(kernel_set) == depth                 # 128-byte B steps
    assert _dispatch.pair_chunk_depth(kernel_set, 64) == pair_depth   # two 64-byte panels


@pytest.mark.parametrize("dtype, pair_depth", [(np.float32, 1365), (np.float16, 2048)])
def test_avx2_exact_stacks_take_long_k_chunks(monkeypatch, dtype, pair_depth):
    if "avx2" not in _dispatch.available_kernel_sets():
        pytest.skip("needs AVX2")
    monkeypatch.setattr(_dispatch, "l1_data_bytes", lambda: 32 * 1024)
    # an AVX2-only CPU (no 512-bit FMAs): the plain stacks keep L1-sized chunks;
    # where 512-bit FMAs are split, they take long chunks too (test above)
    monkeypatch.setattr(_dispatch, "fma_512_speedup", lambda: 0.0)
    problem = _problem((1, 256, 64, 64), (256, 128, 4, 4), dtype, strides=(2, 2), pads=(1, 1, 1, 1))
    blocking = _dispatch.decide(problem, kernel_set="avx2").blocking
    # float16 outputs are rounded once: one K chunk whenever the depth allows it
    assert (blocking.max_depth, blocking.pair_max_depth) == (170, pair_depth)
    plan = _engine.plan_for(problem, _dispatch.decide(problem, kernel_set="avx2"))
    stack = plan.stacks[0]
    assert stack["exact"] and stack["store_direct"]
    assert stack["chunk"] == min(256, pair_depth // 4)  # channels of 4 taps


def test_the_fma_probe_measures_a_width_ratio_of_one_or_two():
    speedup = _kernels.avx512_fma_speedup()
    if "avx512f" not in _kernels.cpu_features():
        assert speedup == 0.0
        return
    # split 512-bit FMAs: about 1; native: about 2 (a preempted run only lowers one side
    # of one of seven interleaved runs, and the best of each is kept)
    assert 0.8 <= speedup <= 2.4
    assert abs(speedup - 1.0) < 0.25 or abs(speedup - 2.0) < 0.4


@pytest.mark.parametrize("l1, vector_bytes, depth", [(48 * 1024, 64, 256), (48 * 1024, 128, 128),
                                                     (32 * 1024, 64, 170), (128 * 1024, 128, 341)])
def test_packed_pair_chunks_hold_both_operands_in_two_thirds_of_l1(monkeypatch, l1, vector_bytes,
                                                                   depth):
    monkeypatch.setattr(_dispatch, "l1_data_bytes", lambda: l1)
    monkeypatch.setattr(_dispatch, "fma_512_speedup", lambda: 0.0)  # no AVX-512
    assert _dispatch.pair_chunk_depth("neon", vector_bytes) == depth


def test_exact_stacks_storing_into_y_reserve_no_product_buffer():
    x = np.empty((1, 64, 32, 32), np.float32)
    w = np.empty((64, 32, 4, 4), np.float32)
    for kernel_set in ("avx512", "avx512_wide", "neon"):
        if kernel_set not in _dispatch.available_kernel_sets():
            continue
        _, plan = plan_of(kernel_set, x, w, strides=(2, 2), pads=(1, 1, 1, 1))
        assert plan.stacks["store_direct"].all()
        assert plan.product_capacity == 0


@pytest.mark.parametrize("cores, items", [(1, 4), (2, 8), (4, 16), (6, 24), (64, 24), (None, 4)])
def test_plans_aim_for_work_items_per_core_of_the_machine(monkeypatch, cores, items):
    monkeypatch.setattr(_dispatch.os, "cpu_count", lambda: cores)
    assert _dispatch.work_items_target() == items
    problem = _problem((1, 64, 32, 32), (64, 32, 4, 4), strides=(2, 2))
    assert _dispatch.decide(problem).blocking.min_work_items == items



@pytest.mark.parametrize("dtype, channels, exact", [
    (np.float32, 16, False), (np.float32, 64, True), (np.float64, 64, False),
    (np.float64, 128, True), (np.float16, 64, True)])
def test_avx2_exact_stacks_need_deep_reductions(dtype, channels, exact):
    # k4s2: 4 taps per stack, so the depth is 4 x channels (256 float32 steps, 512 float64)
    if "avx2" not in _dispatch.available_kernel_sets():
        pytest.skip("needs AVX2")
    problem = _problem((1, channels, 64, 64), (channels, channels, 4, 4), dtype, strides=(2, 2),
                       pads=(1, 1, 1, 1))
    decision = _dispatch.decide(problem, kernel_set="avx2")
    assert bool(_engine.plan_for(problem, decision).stacks["exact"].any()) == exact


def test_small_default_thread_calls_stay_on_the_caller_while_the_cores_are_contended(monkeypatch):
    monkeypatch.setattr(_dispatch, "default_threads", lambda: 2)
    small, large = _dispatch.CONTENDED_MAX_MULTIPLY_ADDS - 1, _dispatch.CONTENDED_MAX_MULTIPLY_ADDS
    monkeypatch.setattr(_dispatch, "_pool_contended", lambda threads: False)
    assert _dispatch.resolve_threads(None, 8, small) == 2
    monkeypatch.setattr(_dispatch, "_pool_contended", lambda threads: True)
    assert _dispatch.resolve_threads(None, 8, small) == 1
    assert _dispatch.resolve_threads(None, 8, large) == 2
    assert _dispatch.resolve_threads(2, 8, small) == 2   # asked for: kept


def test_the_pool_reports_contention_as_a_bool():
    assert _kernels.pool_contended(2) in (True, False)


def test_avx2_packs_tile_buffer_panels_only_for_many_row_blocks():
    if "avx2" not in _dispatch.available_kernel_sets():
        pytest.skip("needs AVX2")
    decision = _dispatch.decide(_problem((1, 64, 32, 32), (64, 32, 3, 3), pads=(1, 1, 1, 1)),
                                kernel_set="avx2")
    assert decision.pack_min_blocks == _dispatch.PACK_MIN_BLOCKS          # B read from x
    assert decision.buffer_pack_min_blocks == _dispatch.AVX2_BUFFER_PACK_MIN_BLOCKS


def test_long_rows_are_cut_into_tiles_whose_product_fits_rather_than_row_groups():
    """A 1-D Conv of 256 channels on 4096 positions: one tile of the whole row would
    need a 4 MiB product, cut into row groups that each fill the whole input again;
    shorter tiles fit the product budget and fill it once."""
    from convt import Conv, explain
    for set_name in _dispatch.available_kernel_sets():
        if set_name in ("blas",):
            continue
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(_dispatch.KERNEL_SET_VARIABLE, set_name)
            patch.setattr(_dispatch.os, "cpu_count", lambda: 1)
            plan = explain(Conv(pads=(3, 3)), (1, 256, 4096), (256, 256, 7)).plan
        stack = plan.stacks[0]
        assert stack["row_groups"] == 1
        assert stack["tile_cols"] < 4096
        assert stack["rows"] * stack["columns"] * 4 <= _dispatch.PRODUCT_BYTES
        # heavy weights (a k16 s8 vocoder layer: 8 MiB) keep their row groups
        from convt import ConvTranspose
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(_dispatch.KERNEL_SET_VARIABLE, set_name)
            plan = explain(ConvTranspose(strides=(8,), pads=(4, 4)), (1, 512, 1024),
                           (512, 256, 16)).plan
        assert plan.stacks["row_groups"].max() > 1


@pytest.mark.parametrize("x_shape, w_shape, layer", [
    ((8, 64, 56, 56), (64, 64, 3, 3), "ConvTranspose"),
    ((1, 32, 64, 64, 64), (32, 32, 3, 3, 3), "Conv"),
])
def test_tiles_cut_to_fit_the_product_have_equal_rows(monkeypatch, x_shape, w_shape, layer):
    """Rows cut to fit the product budget are shared evenly by the row tiles: one
    short tile per plane or image (56 rows as 35 + 21, 64 as 62 + 2) made the
    items unequal, and a thread idle while the other finished a long one."""
    import convt
    params = dict(pads=(1,) * (2 * (len(x_shape) - 2)))
    monkeypatch.setattr(_dispatch.os, "cpu_count", lambda: 2)
    # the product budget for a whole plane (tile rows x channels, or twice that for
    # the transposed kernels), then one a third of it: rows are cut either way
    product = 2 * x_shape[-2] * x_shape[-1] * w_shape[0] * 4
    monkeypatch.setattr(_dispatch, "PRODUCT_BYTES", product // 3)
    for kernel_set in _dispatch.available_kernel_sets():
        if kernel_set == "blas":
            continue
        monkeypatch.setenv(_dispatch.KERNEL_SET_VARIABLE, kernel_set)
        stack = convt.explain(getattr(convt, layer)(**params), x_shape, w_shape).plan.stacks[0]
        grid_rows = x_shape[-2]
        assert stack["tile_rows"] < grid_rows, kernel_set  # the budget did cut them
        tiles = -(-grid_rows // stack["tile_rows"])
        assert stack["tile_rows"] == -(-grid_rows // tiles), (kernel_set, stack["tile_rows"])


@pytest.mark.parametrize("positions", [4096, 5000, 20000])
def test_a_row_cut_to_fit_is_shared_by_equal_tiles(positions):
    """A 1-D row over the tile budget is cut into tiles of equal whole panels: 4096
    positions of a k31 Conv were cut as 3040 + 1056 on x86, and of its two items one
    thread ran three quarters.  (Budgets follow the CPU's caches: a set may hold 4096
    or 5000 positions whole; 20000 are cut everywhere.)"""
    from convt import Conv, explain
    for kernel_set in _dispatch.available_kernel_sets():
        if kernel_set == "blas":
            continue
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(_dispatch.KERNEL_SET_VARIABLE, kernel_set)
            stack = explain(Conv(pads=(15, 15)), (1, 64, positions), (64, 64, 31)).plan.stacks[0]
        cols, tiles = int(stack["tile_cols"]), int(stack["col_tiles"])
        if tiles == 1 and positions < 20000:
            assert cols >= positions, kernel_set  # held whole
            continue
        assert 1 < tiles and (tiles - 1) * cols < positions <= tiles * cols, kernel_set
        # the last tile is short by less than a panel per tile (rounding to whole panels)
        assert tiles * cols - positions < tiles * int(stack["panel"]), (kernel_set, cols)


@pytest.mark.parametrize("cg, limit, chunk", [(64, 18, 16), (19, 18, 10), (256, 85, 64),
                                              (12, 18, 12), (7, 1, 1), (512, 74, 74)])
def test_k_chunks_are_equal(cg, limit, chunk):
    # as few chunks as the limit allows, of equal size: no short pass over the product
    assert _plan._balanced_chunk(cg, limit) == chunk
    assert -(-cg // chunk) == -(-cg // min(cg, limit))


def test_few_items_are_weighed_by_their_rows_and_blocks():
    """2 tiles of 4 and 3 rows leave one of 2 cores idle 1/8 of the time (their count
    says 0); equal items and many items are counted."""
    tile = types.SimpleNamespace(rows=4, cols=7)
    assert _plan._split_idle_share([7, 7], tile, 8, 1, 1, 2) == pytest.approx(1 / 7)
    assert _plan._split_idle_share([8, 7], tile, 8, 1, 1, 2) == 0
    assert _plan._split_idle_share([7, 7], tile, 8, 2, 1, 2) == 0  # 4 + 3 rows per core
    # groups of 2 and 1 blocks: items 8, 4, 6, 3 dealt in order: 8 + 3 and 4 + 6
    assert _plan._split_idle_share([7, 7], tile, 3, 2, 1, 2) == pytest.approx(11 * 2 / 21 - 1)
    many = _plan.SPLIT_IDLE_MAX_ROUNDS * 2 + 1
    assert _plan._split_idle_share([4 * many - 1, 7], tile, 8, 1, 1, 2) == pytest.approx(
        _plan._idle_share(many, 2))
    assert _plan._split_idle_share([7, 7], tile, 8, 1, 1, 1) == 0


@pytest.mark.skipif(not {"avx512"} & set(_dispatch.available_kernel_sets()),
                    reason="the AVX-512 set's transposed kernels")
def test_a_seven_row_map_on_two_cores_splits_its_rows_not_its_rows_of_positions(monkeypatch):
    """A 3x3 stride-1 layer, 256 -> 192 channels over 7x7: two row groups of a
    whole-map tile, not tiles of 4 and 3 rows (the Conv: 1.12x on 2 Zen 4 threads)."""
    monkeypatch.setattr(_dispatch.os, "cpu_count", lambda: 2)
    x, w = np.empty((1, 256, 7, 7), np.float32), np.empty((256, 192, 3, 3), np.float32)
    stacks = plan_of("avx512", x, w, pads=(1, 1, 1, 1))[1].stacks
    assert stacks["transposed"][0] and stacks["row_groups"][0] == 2 and stacks["items"][0] == 2


@pytest.mark.parametrize("x_shape, w_shape, params", [
    ((1, 256, 64, 64), (256, 128, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),  # 17 tiles
    ((1, 512, 1024), (512, 256, 16), dict(strides=(8,), pads=(4, 4))),  # 9 row groups
    ((1, 16, 250, 256), (16, 16, 3, 3), dict(pads=(1, 1, 1, 1))),  # 29 tiles
])
@pytest.mark.parametrize("cores", [2, 3, 4])
def test_a_single_stack_shares_its_items_evenly_over_the_cores(monkeypatch, x_shape, w_shape,
                                                              params, cores):
    x, w = np.empty(x_shape, np.float32), np.empty(w_shape, np.float32)
    for kernel_set in _dispatch.available_kernel_sets():
        monkeypatch.setattr(_dispatch.os, "cpu_count", lambda: cores)
        items = len(plan_of(kernel_set, x, w, **params)[1].items)
        monkeypatch.setattr(_plan, "BALANCE_TOLERANCE", 1.0)  # as cut before balancing
        before = len(plan_of(kernel_set, x, w, **params)[1].items)
        monkeypatch.undo()
        idle = _plan._idle_share(items, cores)
        assert idle <= _plan._idle_share(before, cores), (kernel_set, items, before)
        if cores == 2 and kernel_set != "blas":  # always possible here
            assert idle <= _plan.BALANCE_TOLERANCE, (kernel_set, items)


def test_plans_cut_for_other_cores_give_the_same_bits(monkeypatch):
    # tiles and row groups decide which thread computes an output, never how
    rng = np.random.default_rng(5)
    cases = [((1, 96, 21, 20), (96, 64, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
             ((2, 40, 150), (40, 48, 16), dict(strides=(8,), pads=(4, 4))),
             ((1, 16, 61, 64), (16, 16, 3, 3), dict(pads=(1, 1, 1, 1)))]
    plans_differ = False
    for x_shape, w_shape, params in cases:
        x = rng.standard_normal(x_shape).astype(np.float32)
        w = rng.standard_normal(w_shape).astype(np.float32)
        outputs, items = [], set()
        for cores in (1, 2, 3):
            monkeypatch.setattr(_dispatch.os, "cpu_count", lambda cores=cores: cores)
            _engine._execution.cache_clear()
            layer = ConvTranspose(num_threads=2, **params)
            outputs.append(layer.apply(x, w))
            items.add(len(explain(layer, x, w).plan.items))
        plans_differ = plans_differ or len(items) > 1
        for other in outputs[1:]:
            np.testing.assert_array_equal(other, outputs[0])
    _engine._execution.cache_clear()  # drop the plans made for other machines
    assert plans_differ


def _equal_blocks_near(stack, nominal):
    """Whether a stack's K chunks run in blocks of about ``nominal`` steps (within a
    factor 1.5) that are equal: no short last block."""
    chunk_depth, block = int(stack["chunk"] * stack["taps"]), int(stack["sum_block"])
    count = -(-chunk_depth // block)
    last = chunk_depth - (count - 1) * block
    return 2 * nominal <= 3 * block <= 9 * nominal // 2 and last >= block - count + 1


@pytest.mark.parametrize("layer, x_shape, w_shape, nominal", [
    (Conv(strides=(2, 2), pads=(1, 1, 1, 1)), (1, 128, 56, 56), (256, 128, 3, 3), "DEEP"),
    (ConvTranspose(strides=(8,), pads=(4, 4)), (1, 512, 1024), (512, 256, 16), "DEEP"),
    (Conv(), (1, 1024, 14, 14), (256, 1024, 1, 1), "DEEP"),
    (Conv(pads=(1, 1)), (1, 80, 64), (64, 80, 3), "SHALLOW"),
])
def test_k_chunks_are_cut_into_blocks_of_equal_length(layer, x_shape, w_shape, nominal):
    """Every blocked sum ends with a pass over its outputs, so a K chunk runs as
    equal blocks of about the nominal length (144 steps as 72 + 72, not
    64 + 64 + 16), on any CPU's chunk length."""
    stacks = explain(layer, x_shape, w_shape, "float32").plan.stacks
    assert all(_equal_blocks_near(stack, getattr(_dispatch, "SUM_BLOCK_" + nominal))
               for stack in stacks)


@pytest.mark.parametrize("layer, x_shape, w_shape", [
    (ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1)), (1, 16, 64, 64), (16, 16, 4, 4)),
    (Conv(pads=(1, 1, 1, 1)), (1, 16, 64, 64), (16, 16, 3, 3)),
    (Conv(strides=(2, 2), pads=(1, 1, 1, 1)), (1, 128, 28, 28), (256, 128, 3, 3)),
])
def test_float64_sums_each_k_chunk_as_one_block(layer, x_shape, w_shape):
    """float64 needs no blocked sums for its error: each K chunk (one kernel call) is
    one block, which the kernels sum in registers; float32 keeps its blocks."""
    stacks = explain(layer, x_shape, w_shape, "float64").plan.stacks
    assert all(int(stack["sum_block"]) == int(stack["chunk"] * stack["taps"])
               for stack in stacks)
    stacks32 = explain(layer, x_shape, w_shape, "float32").plan.stacks
    assert all(int(stack["sum_block"]) <= _dispatch.SUM_BLOCK_DEEP * 3 // 2
               for stack in stacks32)


def test_chunks_under_one_and_a_half_blocks_keep_a_second_block():
    """A grouped 3x3 Conv over 4 channels per group sums 36 steps: one block of 36 would
    be no blocking at all (its float32 error rose 7% in RMS), so it keeps 32 + 4."""
    stacks = explain(Conv(pads=(1, 1, 1, 1), group=32), (1, 128, 56, 56), (128, 4, 3, 3),
                     "float32").plan.stacks
    assert [int(stack["chunk"] * stack["taps"]) for stack in stacks] == [36]
    assert stacks["sum_block"].tolist() == [_dispatch.SUM_BLOCK_SHALLOW]


def test_few_channel_tap_sums_take_short_blocks_and_lower_the_float32_error(monkeypatch):
    """An FCN head (21 classes, k16 s8: 4 taps x 21 channels per output) sums in blocks
    of SUM_BLOCK_FEW_CHANNELS, as col2im engines sum a tap's 21 channels before the
    taps; a Conv over as many channels (summed whole by direct engines) keeps the
    shallow block.  The shorter blocks lower the RMS error against float64."""
    import convt
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 21, 24, 24)).astype(np.float32)
    w = rng.standard_normal((21, 21, 16, 16)).astype(np.float32)
    layer = ConvTranspose(strides=(8, 8), pads=(4, 4, 4, 4))
    assert explain(layer, x.shape, w.shape).plan.stacks["sum_block"].tolist() == [
        _dispatch.SUM_BLOCK_FEW_CHANNELS]
    conv_stacks = explain(convt.Conv(pads=(1, 1, 1, 1)), (1, 21, 24, 24), (21, 21, 3, 3)).plan.stacks
    # the shallow block (its K chunks cut into equal blocks of about that length)
    assert _equal_blocks_near(conv_stacks[0], _dispatch.SUM_BLOCK_SHALLOW)
    exact = layer.apply(x.astype(np.float64), w.astype(np.float64))

    def rms_error():
        return float(np.sqrt(np.mean((layer.apply(x, w) - exact) ** 2)))

    short = rms_error()
    monkeypatch.setattr(_dispatch, "SUM_BLOCK_FEW_CHANNELS", _dispatch.SUM_BLOCK_SHALLOW)
    assert explain(layer, x.shape, w.shape).plan.stacks["sum_block"].tolist() == [
        _dispatch.SUM_BLOCK_SHALLOW]
    assert short < 0.93 * rms_error()


@pytest.mark.parametrize("x_shape, w_shape, params, row_stride", [
    ((1, 8, 9, 56), (16, 8, 3, 3), dict(pads=(1, 1, 1, 1)), 57),        # 1 zero each side
    ((1, 8, 9, 20), (16, 8, 5, 5), dict(pads=(2, 2, 2, 2)), 22),        # 2 each side
    ((1, 8, 9, 20), (16, 8, 3, 4), dict(pads=(1, 2, 1, 1)), 22),        # 2 left, 1 right
    ((1, 8, 9, 20), (16, 8, 3, 3), dict(pads=(1, 3, 1, 3), dilations=(1, 3)), 23),
    ((2, 4, 40), (8, 4, 4), dict(pads=(27, 27), dilations=(9,)), None),  # more than a panel
    ((1, 8, 9, 28), (16, 8, 3, 3), dict(pads=(1, 1, 1, 1), strides=(2, 2)), 15),  # data right
])
def test_full_row_tiles_share_the_zero_columns_of_consecutive_rows(x_shape, w_shape, params,
                                                                   row_stride):
    """A tile spanning whole rows lays consecutive buffer rows over each other where
    both hold zero padding: one product column less per shared zero and row.  Every
    kernel set reads zeros there (the reference checks it), up to the zeros after the
    last plane (at most a panel)."""
    import convt
    from _conv_helpers import assert_conv_matches_reference, run_conv_engine
    rng = np.random.default_rng(3)
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal(w_shape)
    if row_stride is not None:
        stacks = explain(convt.Conv(**params), x_shape, w_shape).plan.stacks
        assert stacks["row_stride"].tolist() == [row_stride]
    for kernel_set in _dispatch.available_kernel_sets():
        for dtype in (np.float32, np.float64):
            y = run_conv_engine(f"gemm-{kernel_set}", x.astype(dtype), w.astype(dtype), **params)
            assert_conv_matches_reference(y, x.astype(dtype), w.astype(dtype), **params)


def test_tile_heights_waste_little_of_the_last_panel(monkeypatch):
    """A window tile's product rows are runs of its row stride, and the kernels
    compute whole panels (or a half one): the planner picks the tile height whose
    computed columns, input copies and weight rereads cost least.  3x3 s2 over
    56x56 (28 x 28 outputs, row stride 29) on 16-position panels and 2 cores:
    4-row tiles use 115 of the 120 columns they compute (7 panels and a half),
    5-row tiles 144 of 144."""
    from dataclasses import replace

    import convt
    layer = convt.Conv(strides=(2, 2), pads=(1, 1, 1, 1))
    x_shape, w_shape = (1, 128, 56, 56), (256, 128, 3, 3)
    report = explain(layer, x_shape, w_shape, np.float32)
    problem = report.problem
    blocking = replace(_dispatch.decide(problem, engine="gemm", kernel_set="portable").blocking,
                       mr=12, nr=16, half_panels=True, cores=2, min_work_items=8,
                       min_split_rows=4, operand_bytes=384 * 1024)
    assert _plan._computed_columns(115, blocking) == 120
    assert _plan._computed_columns(144, blocking) == 144
    assert _plan._computed_columns(100, replace(blocking, half_panels=False)) == 112

    def stack_of(**changes):
        _plan.gemm_plan.cache_clear()  # plans are cached, not keyed on _plan's constants
        plan = _plan.gemm_plan(problem.geometry, 1, 128, 256, 1, replace(blocking, **changes),
                               transpose=False)
        return plan.stacks[0]

    chosen = stack_of()
    assert chosen["row_stride"] == 29
    assert chosen["tile_rows"] == 5 and chosen["columns"] == 144
    # without the cost model: the MIN_SPLIT_ROWS cut, 4 rows in 120 columns
    monkeypatch.setattr(_plan, "HEIGHT_MIN_GAIN", 1.0)
    unchosen = stack_of()
    assert unchosen["tile_rows"] == 4 and unchosen["columns"] == 128  # 115 used: 7.5 panels
    _plan.gemm_plan.cache_clear()


@pytest.mark.parametrize("x_shape, w_shape, params", [
    ((1, 16, 28, 28), (32, 16, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    ((1, 8, 17, 56), (16, 8, 3, 3), dict(pads=(1, 1, 1, 1))),  # shared zero columns
    ((2, 8, 23, 9), (24, 8, 5, 5), dict(pads=(2, 2, 2, 2), dilations=(1, 2))),
])
def test_cost_chosen_tile_heights_compute_the_reference(monkeypatch, x_shape, w_shape, params):
    """Tiles of every height the cost model may pick, with their rows' shared zero
    columns, give the reference's result on every kernel set."""
    from _conv_helpers import assert_conv_matches_reference, run_conv_engine
    rng = np.random.default_rng(5)
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal(w_shape)
    try:
        for fill_cost in (0, 20, 10**6):  # heights of least waste; of fewest copies
            monkeypatch.setattr(_plan, "HEIGHT_FILL_COST", fill_cost)
            monkeypatch.setattr(_plan, "HEIGHT_MIN_GAIN", -1.0)  # any other height wins
            _plan.gemm_plan.cache_clear()
            _engine._execution.cache_clear()
            for kernel_set in _dispatch.available_kernel_sets():
                y = run_conv_engine(f"gemm-{kernel_set}", x, w, **params)
                assert_conv_matches_reference(y, x, w, **params)
    finally:
        _plan.gemm_plan.cache_clear()
        _engine._execution.cache_clear()


def test_tuning_follows_every_change_of_a_constant(monkeypatch):
    """tuning() keeps its tuple between calls; setting or deleting a module attribute
    (as tests and tune.py do) must drop it, or cached plans would outlive the change."""
    before = _dispatch.tuning()
    assert _dispatch.tuning() is before  # kept, not rebuilt per call
    monkeypatch.setattr(_dispatch, "MIN_TILE", _dispatch.MIN_TILE + 1)
    changed = _dispatch.tuning()
    assert changed != before and _dispatch.MIN_TILE in changed
    monkeypatch.setattr(_dispatch, "EXTRA_NAME", 1, raising=False)
    monkeypatch.delattr(_dispatch, "EXTRA_NAME")
    assert _dispatch.tuning() == changed
    monkeypatch.undo()
    assert _dispatch.tuning() == before
