"""The new operator families cross-compiled for the 32-bit ARMv7 board (C
backend) and the RISC-V board (LLVM backend), the cheaper builds with the
other backend too, and the families with no aarch64 row elsewhere for
qemu-aarch64, run under qemu-user at two sizes of the symbolic dim against
the test modules' references (numpy from the spec, ONNX Runtime or
onnx.reference). One merged model per family (the RPC server takes at most
16 inputs and 16 outputs), built from the family's own test-module builders;
one session per board."""

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import onnx
import pytest
from onnx import helper

import relax_edge as rxe
from tests.codegen import test_data_dependent as dd
from tests.frontend import test_onnx_attention as attention
from tests.frontend import test_onnx_control_flow as control
from tests.frontend import test_onnx_detect as detect
from tests.frontend import test_onnx_loss as loss
from tests.frontend import test_onnx_misc_ops as misc
from tests.frontend import test_onnx_onehot_cumsum as onehot
from tests.frontend import test_onnx_quant as quant
from tests.frontend import test_onnx_reduce_ops as reduce
from tests.frontend import test_onnx_rnn as rnn
from tests.frontend import test_onnx_scatter as scatter
from tests.frontend import test_onnx_space_ops as space

pytestmark = pytest.mark.slow


@dataclass
class Part:
    """One model of a merged family: its inputs at a size, its expected outputs, their check."""
    model: onnx.ModelProto
    feeds: Callable          # size -> input arrays, in the model's input order
    expected: Callable       # input arrays -> expected outputs
    check: Callable          # (actual outputs, expected outputs) -> None


@dataclass
class Family:
    model: onnx.ModelProto
    sizes: tuple
    check: Callable          # (loaded model, size) -> None
    bounds: dict = field(default_factory=dict)   # dim_bounds (data-dependent sizes need them)


def _prefix(graph, prefix):
    """Every name in `graph` and its subgraphs prefixed in place (onnx.compose.add_prefix leaves the outer names
    that subgraphs read unprefixed)."""
    for v in (*graph.input, *graph.output, *graph.value_info, *graph.initializer):
        v.name = prefix + v.name
    for node in graph.node:
        node.name = prefix + node.name if node.name else ""
        node.input[:] = [prefix + n if n else "" for n in node.input]
        node.output[:] = [prefix + n if n else "" for n in node.output]
        for attr in node.attribute:
            for sub in (*([attr.g] if attr.HasField("g") else []), *attr.graphs):
                _prefix(sub, prefix)
    return graph


def merged(parts, opset, sizes=(1, 3), bounds=None) -> Family:
    """The parts' graphs side by side in one model at `opset` (names prefixed by the part's number; symbolic
    dims keep their names, so the parts' feeds at a size agree on them)."""
    graphs = [_prefix(onnx.GraphProto.FromString(p.model.graph.SerializeToString()), f"p{i}_")
              for i, p in enumerate(parts)]
    graph = helper.make_graph([n for g in graphs for n in g.node], "merged", [v for g in graphs for v in g.input],
                              [v for g in graphs for v in g.output], [t for g in graphs for t in g.initializer])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = max(p.model.ir_version for p in parts)

    def check(loaded, size):
        feeds = [p.feeds(size) for p in parts]
        got = list(loaded.run(*[a for f in feeds for a in f]))
        for part, arrays in zip(parts, feeds):
            count = len(part.model.graph.output)
            part.check(got[:count], part.expected(arrays))
            del got[:count]
        assert not got
    return Family(model, sizes, check, bounds or {})


# ------------------------------------------------ the families, each from its test module's builders

def _one_node_part(module, name):
    """A case of a test module built on tests/frontend/one_node.py (reduce, onehot/cumsum)."""
    case = next(c for c in module.CASES if c.name == name)
    model = module._model(case)
    return Part(model, lambda n: module._arrays(case, n), lambda arrays: [module._expected(case, model, arrays)],
                lambda got, want: module._check(got[0], want[0]))


def _reduce_part(name):
    return _one_node_part(reduce, name)


def _space_part(name):
    case = next(c for c in space.CASES if c.name == name)
    return Part(space._model(case), lambda n: [space._array(space._concrete(case, n), n)],
                lambda arrays: [space._expected(case, space._model(space._concrete(case, arrays[0].shape[0])),
                                                arrays[0])],
                lambda got, want: space._check(got[0], want[0]))


def _onehot_part(name):
    return _one_node_part(onehot, name)


def _rnn_part(name):
    case = next(c for c in rnn.CASES if c.name == name)
    return Part(rnn._model(case), lambda n: list(rnn._feeds(case, n).values()),
                lambda arrays: rnn._expected(case, dict(zip(rnn._feeds(case, 1), arrays))),
                lambda got, want: rnn._check(case, got, want))


def _attention_part(name, sizes):
    case = attention.BY_NAME[name]
    model = attention._model(case)
    return Part(model, lambda k: attention._arrays(case, sizes[k]), lambda arrays: attention._expected(case, model,
                                                                                                        arrays),
                lambda got, want: attention._check(case, got, want))


def _topk_part(name):
    _, k, axis, largest, opset, dtype, shape = next(c for c in detect.TOPK if c[0] == name)
    model = detect._topk_model(k, axis, largest, opset, dtype, shape)
    return Part(model, lambda n: [detect._topk_input(name, dtype, detect._concrete(shape, n))],
                lambda arrays: detect._ort(model, {"x": arrays[0]}), detect._check_all)


def _if_part():
    model = control.if_model((1,))
    return Part(model, lambda n: list(control.if_feeds(n % 2 == 1, n > 1, n, (1,)).values()),
                lambda arrays: control.ort_run(model, dict(zip("c dv x0".split(), arrays))), _close(1e-5))


def _loop_part():
    model = control.loop_model(4)
    return Part(model, lambda n: [control.rand(n, 2), control.rand(n, 2)],
                lambda arrays: control.ort_run(model, dict(zip(("y0", "x"), arrays))), _close(1e-5))


def _scan_part():
    model = control.scan9_model(3)
    return Part(model, lambda n: [control.rand(n, 3), control.rand(n, 3, 3)],
                lambda arrays: control.ort_run(model, dict(zip(("s0", "x"), arrays))), _close(1e-5))


def _loss_part():
    def feeds(n):
        x, t, w = loss._data(11, n, n + 1, ignore_index=3)
        t[t == 3] = np.where(np.arange((t == 3).sum()) % 2, 1, 3)   # both ignore indices occur
        return [x, t, w]
    return Part(loss._compiled_model(), feeds, lambda arrays: loss._compiled_expected(*arrays),
                lambda got, want: [loss._check(g, w) for g, w in zip(got, want, strict=True)])


def _close(tol):
    def check(got, want):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    return check


def _data_dependent_part(model, feeds):
    names = [v.name for v in model.graph.input]
    return Part(model, feeds, lambda arrays: dd._ort(model, dict(zip(names, arrays))), dd._check)


def _compress_feeds(n):
    rng = np.random.default_rng(n)
    return [rng.standard_normal((n, 4)).astype(np.float32), rng.random(n + 1) > 0.4]


def _unique_feeds(n):
    rng = np.random.default_rng(n)
    return [rng.integers(0, 3, (2, n)).astype(np.float32), rng.integers(0, 2, (n, 3)).astype(np.int64)]


def _random_family():
    """The random operators' values are the op records' (splitmix64 of seed and element index), as interpreted."""
    pytest.importorskip("ml_dtypes")   # the random module's bfloat16 draws
    from tests.frontend import test_onnx_random as random
    model = random._model()
    mod = rxe.from_onnx(model)

    def check(loaded, n):
        arrays = random._inputs(n, 20 + n)
        random._same(loaded.run(*arrays), rxe.interpret(mod, *arrays))
    return Family(model, (1, 6), check)


def _scatter_family(names):
    cases = [scatter.BY_NAME[n] for n in names]

    def check(loaded, n):
        arrays = [scatter._feeds(c, n) for c in cases]
        outs = loaded.run(*[a for arrs in arrays for a in arrs])
        for case, arrs, out in zip(cases, arrays, outs, strict=True):
            scatter._check(case, out, scatter._expected(case, arrs))
    return Family(scatter._model(cases), (1, 4), check)


# the misc module's emulated cases with STFT for Upsample (16 inputs)
MISC = [c for c in misc.EMULATED if c.name != "upsample_nearest"] + [c for c in misc.COMPILED
                                                                     if c.name == "stft_hann_window"]


def _families():
    attention_sizes = attention.SIZES[1:]
    return {
        "reduce": lambda: merged([_reduce_part(n) for n in (
            "l1_int_all_opset13", "l2_last_keep", "sum_square_axes02", "log_sum_exp_last", "mean_int_truncates",
            "max_int64_do_not_keepdims", "argmin_int_last_index", "lp_l2_axis1", "mvn_default", "lrn_size5",
            "instance_norm", "group_norm21")], opset=21),
        "space_onehot_cumsum": lambda: merged(
            [_space_part(n) for n in ("d2s_crd_opset11", "d2s_crd_int32", "d2s_dcr_symbolic_hw", "s2d_opset13",
                                      "s2d_int64", "s2d_bool_b4", "eye_square", "eye_k_neg2_int", "eye_dtype_int64",
                                      "eye_dtype_bool")]
            + [_onehot_part(n) for n in ("onehot_axis0", "onehot_negative_axis", "onehot_int_values",
                                         "cumsum_reverse_exclusive", "cumsum_int32", "cumsum_int64_reverse")],
            opset=14),
        "rnn": lambda: merged([_rnn_part(n) for n in ("rnn_bidir_relu_affine", "gru_bidir_lbr_lens_h16",
                                                      "lstm_peepholes_lens_h16")], opset=14),
        "attention": lambda: merged([_attention_part(n, attention_sizes) for n in (
            "attn_3d_past_float_mask", "rms_last_axis", "rope_3d_interleaved_partial")], opset=23,
            sizes=(0, 1)),
        "control_loss_topk": lambda: merged([_if_part(), _loop_part(), _scan_part(), _loss_part(),
                                             _topk_part("k3_last_axis"), _topk_part("k2_axis0_int64")], opset=17),
        "scatter": lambda: _scatter_family(c.name for c in scatter.EMULATED[0]),
        "sampling": lambda: _scatter_family(c.name for c in scatter.EMULATED[1]),
        # the same operators without bicubic taps (a C build of those takes gcc tens of seconds)
        "sampling_bilinear": lambda: _scatter_family(("gs_bilinear_zeros", "roi_avg_half_pixel", "deform_basic")),
        "misc_einsum_signal": lambda: Family(misc._model(MISC, prefixed=True), (1, 2),
                                             lambda loaded, n: misc._run_merged(loaded, MISC, (n,))),
        # data-dependent output sizes (ABI 3), every NonZero count 0 at n = 1
        "nonzero_nms_compress": lambda: merged([
            _data_dependent_part(dd.NONZERO, lambda n: dd._nonzero_inputs(n, n, zero=n == 1)),
            _data_dependent_part(dd.NMS, lambda n: list(dd._nms_inputs(min(n, 2), n, n))),
            _data_dependent_part(dd.COMPRESS, _compress_feeds)], opset=13, sizes=(1, 5),
            bounds={"n": 6, "b": 2, "c": 7}),
        "unique": lambda: merged([_data_dependent_part(dd.UNIQUE, _unique_feeds)], opset=11, sizes=(1, 6),
                                 bounds={"n": 9}),
        "random": _random_family,
        "quant": lambda: Family(quant._merged(quant.QEMU), (1, 3),
                                lambda loaded, n: quant._run_merged(loaded.run, quant.QEMU, (n,))),
    }


FAMILIES = _families()
# every family on qemu-armv7 with C (random: in its own module) and on qemu-riscv64 with LLVM, the cheaper builds
# also with the other backend; on qemu-aarch64 the families with no row in their own test module
ON_BOTH_BACKENDS = ("reduce", "space_onehot_cumsum", "attention", "control_loss_topk", "scatter", "quant",
                    "nonzero_nms_compress", "unique", "random")
RUNS = ([(f, "qemu-armv7", "c") for f in FAMILIES if f not in ("sampling", "random")]
        + [(f, "qemu-riscv64", "llvm") for f in FAMILIES if f != "sampling_bilinear"]
        + [(f, "qemu-armv7", "llvm") for f in ON_BOTH_BACKENDS] + [(f, "qemu-riscv64", "c") for f in ON_BOTH_BACKENDS]
        + [(f, "qemu-aarch64", "c") for f in ("reduce", "space_onehot_cumsum")])


@pytest.fixture(scope="module")
def sessions():
    """One session per board for the whole module."""
    opened = {}

    def get(board):
        if board not in opened:
            opened[board] = rxe.connect(board)
        return opened[board]
    yield get
    for dev in opened.values():
        dev.close()


@pytest.mark.parametrize("family, board, backend", RUNS, ids=[f"{f}-{b}-{k}" for f, b, k in RUNS])
def test_family_on_emulated_board(family, board, backend, sessions, tmp_path):
    fam = FAMILIES[family]()
    art = rxe.build(rxe.from_onnx(fam.model, dim_bounds=fam.bounds), board=board, backend=backend,
                    out_dir=tmp_path, name="m", quiet=True, profile=False)
    with sessions(board).load(art) as loaded:
        for size in fam.sizes:
            fam.check(loaded, size)
