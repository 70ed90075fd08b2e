"""Tuning tables without a device: validation errors name the file and the
field, the defaults are the C sources' values, a table changes the -D flags,
the scratch mirrors (checked against the C macros compiled with those flags)
and the build key, and `best`'s noise rule on synthetic measurements."""

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from relax_edge import tuning
from relax_edge.build import build_key, emit, kernel_prefix, optimize_module
from relax_edge.codegen.host_program import lower_host
from relax_edge.library import kernels as K
from relax_edge.memory import plan_module
from relax_edge.target import load_board
from relax_edge.toolchain import Toolchain
from tests.tuning.test_measure import model, weights

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "runtime_c"


def write(tmp_path, doc, name="host.json"):
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


@pytest.mark.parametrize("doc, message", [
    ({"kernels": {"gemm": {"MC": 64}}}, r"kernels\.gemm\.MC: unknown knob 'MC' of gemm"),
    ({"kernels": {"conv3d": {}}}, r"kernels\.conv3d: unknown kernel"),
    ({"kernels": {"gemm": {"KC": "128"}}}, r"kernels\.gemm\.KC: KC must be an integer"),
    ({"kernels": {"gemm": {"NC": 200}}}, r"kernels\.gemm\.NC: NC 200 is not a multiple of 16"),
    ({"kernels": {"gemm": {"KC": 4}}}, r"KC 4 is outside \[16, 1024\]"),
    ({"kernels": {"gemm": []}}, r"kernels\.gemm must be a mapping"),
    ({"measured": {"gemm": {"buckets": {"huge": {}}}}}, r"measured\.gemm\.buckets\.huge: unknown bucket"),
    ({"board": "qemu-aarch64", "kernels": {}}, r"field 'board' is 'qemu-aarch64' but the table is read for board host"),
    ({"kernels": {}, "tile": 3}, r"unknown field 'tile'"),
    ({"version": 7}, r"field 'version' is 7"),
    ("{not json", r"not valid JSON \(line 1"),
])
def test_a_bad_table_is_refused_naming_the_file_and_the_field(tmp_path, doc, message):
    path = write(tmp_path, doc)
    with pytest.raises(tuning.TuningError, match=message) as err:
        tuning.load_table("host", path)
    assert str(path) in str(err.value)


def test_blocks_past_the_stack_bounds_are_refused_on_a_bare_metal_board(tmp_path):
    path = write(tmp_path, {"kernels": {"gemm": {"KC": 384}}}, "m4.json")
    with pytest.raises(tuning.TuningError, match=r"KC 384 is more than 256 on the bare-metal board qemu-cortex-m4"):
        tuning.load_table("qemu-cortex-m4", path)
    assert tuning.load_table("qemu-aarch64", path)["gemm"]["KC"] == 384


def test_a_board_yaml_names_its_table(tmp_path):
    yaml_text = (ROOT / "boards" / "host.yaml").read_text()
    board_file = tmp_path / "mine.yaml"
    board_file.write_text(yaml_text.replace("name: host", "name: mine") + "tuning: tables/mine.json\n")
    with pytest.raises(tuning.TuningError, match=r"mine\.json: no such tuning table \(named by .*mine\.yaml"):
        tuning.load_table(board_file)
    (tmp_path / "tables").mkdir()
    write(tmp_path / "tables", {"board": "mine", "kernels": {"gemm": {"KC": 128}}}, "mine.json")
    assert tuning.load_table(board_file) == {"gemm": {"KC": 128, "NC": 512, "PARALLEL_WORK": 262144}}
    assert tuning.table_path(board_file) == tmp_path / "tables" / "mine.json"


def test_a_board_without_a_table_has_an_empty_one():
    assert tuning.load_table("qemu-riscv64") == {}


def test_the_defaults_are_the_c_sources_values():
    sources = {"RXE_GEMM_KC": "include/relax_edge/kernels.h", "RXE_GEMM_NC": "include/relax_edge/kernels.h",
               "RXE_GEMM_PARALLEL_WORK": "kernels/gemm.c", "RXE_GEMV_PARALLEL_MIN_MACS": "kernels/gemv.c",
               "RXE_DEPTHWISE_PARALLEL_MIN_MACS": "kernels/depthwise.c",
               "RXE_THREADS_SPIN_ROUNDS": "src/threads.c"}
    assert sorted(sources) == sorted(tuning.MACROS.values())
    for (kernel, knob), macro in tuning.MACROS.items():
        text = (RUNTIME / sources[macro]).read_text()
        assert f"#ifndef {macro}" in text, f"{macro} cannot be overridden"
        (value,) = re.findall(rf"#define {macro} (.+)", text)
        assert eval(value, {}) == tuning.DEFAULTS[kernel][knob], macro   # literals such as (64 * 64 * 64)
    for kernel, knobs in tuning.KNOBS.items():
        for knob, values in knobs.items():
            assert values[0] == tuning.DEFAULTS[kernel][knob] and len(set(values)) == len(values)


def test_a_table_sets_only_the_flags_that_differ_from_the_defaults():
    table = {"gemm": {"KC": 128, "NC": 512, "PARALLEL_WORK": 262144}, "threads": {"SPIN_ROUNDS": 50}}
    assert tuning.cflags(table) == ["-DRXE_GEMM_KC=128", "-DRXE_THREADS_SPIN_ROUNDS=50"]
    assert tuning.cflags({"gemm": dict(tuning.DEFAULTS["gemm"])}) == []
    board = load_board("host")
    tuned = Toolchain.for_board(board, table=table)
    assert "-DRXE_GEMM_KC=128" in tuned.cflags
    assert Toolchain.for_board(board, table={}).cflags == Toolchain.for_board(board, table=tuning.DEFAULTS).cflags


SCRATCH_PROBE = r"""
#include <stdio.h>
#include "relax_edge/kernels.h"
int main(void) {
  printf("%llu %llu %llu\n", (unsigned long long)RXE_LIB_MATMUL_SCRATCH_BYTES(70, 700, 300),
         (unsigned long long)RXE_LIB_MATMUL_SCRATCH_BYTES(9, 33, 100),
         (unsigned long long)RXE_LIB_CONV2D_SCRATCH_BYTES(32, 3, 3, 30, 30, 1));
  return 0;
}
"""


def c_scratch(tmp_path, flags) -> list:
    """The C macros' scratch bytes of SCRATCH_PROBE's cases, compiled with `flags`."""
    src, exe = tmp_path / "probe.c", tmp_path / f"probe{len(flags)}"
    src.write_text(SCRATCH_PROBE)
    subprocess.run(["cc", "-std=c99", f"-I{RUNTIME / 'include'}", *flags, str(src), "-o", str(exe)], check=True)
    return [int(v) for v in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()]


@pytest.mark.parametrize("table", [{}, {"gemm": {"KC": 64, "NC": 1024}}, {"gemm": {"KC": 512, "NC": 64}}])
def test_the_scratch_mirrors_fit_the_c_macros_with_and_without_the_table(tmp_path, table):
    checked = tuning.check_table({"kernels": table}, "host")
    tuned, default = c_scratch(tmp_path, tuning.cflags(checked)), c_scratch(tmp_path, [])
    with tuning.mirrors(checked):
        mirrored = [K.matmul_scratch_bytes(70, 700, 300), K.matmul_scratch_bytes(9, 33, 100),
                    K.conv2d_scratch_bytes(32, 3, 3, 30, 30, 1)]
    assert mirrored == [max(t, d) for t, d in zip(tuned, default)]   # fits either runtime, no more
    assert K.blocking() == (K.KC, K.NC)   # restored after the block


def keyed(board, table):
    """The build key and the generated C of a model with a matmul of two inputs under `table`."""
    tc = Toolchain.for_board(board, table=table)
    with tuning.mirrors(table):
        mod = optimize_module(model(weights()), board)
    host = lower_host(mod, plan_module(mod), "mm", kernel_prefix("c", "mm"))
    sources = emit(host, "c", board)
    return build_key(sources, "c", board, tc, None, False), sources


def test_a_table_changes_the_build_key_and_the_planned_scratch():
    board = load_board("host")
    key, sources = keyed(board, {})
    tuned_key, tuned = keyed(board, tuning.check_table({"kernels": {"gemm": {"NC": 1024}}}, board))
    same_key, _ = keyed(board, tuning.check_table({"kernels": {"gemm": {"NC": 512}}}, board))
    assert tuned_key != key and same_key == key
    assert tuned.files != sources.files   # the matmul's scratch: 256 x 512 floats against 256 x 656


def result(kernel, bucket, config, samples):
    return {"kernel": kernel, "bucket": bucket, "config": config, "samples": list(samples)}


def noisy(center, spread, n=20, seed=0):
    return center * (1 + spread * np.random.default_rng(seed).uniform(-1, 1, n))


def test_best_keeps_the_default_inside_the_noise_and_takes_a_clear_win():
    fast = {"KC": 128}
    inside = [result("gemm", "small", {}, noisy(1.0, 0.1)), result("gemm", "small", fast, noisy(0.97, 0.1, seed=1))]
    assert tuning.best(inside)["gemm"]["config"] == tuning.DEFAULTS["gemm"]
    clear = [result("gemm", "small", {}, noisy(1.0, 0.01)), result("gemm", "small", fast, noisy(0.8, 0.01, seed=1))]
    chosen = tuning.best(clear)["gemm"]
    assert chosen["config"] == {**tuning.DEFAULTS["gemm"], **fast}
    assert chosen["buckets"]["small"]["gain"] == pytest.approx(0.2, abs=0.02)


def test_best_counts_the_spread_between_measurements_of_the_default():
    runs = [result("gemm", "small", {}, noisy(1.0, 0.005)), result("gemm", "small", {}, noisy(1.12, 0.005, seed=2)),
            result("gemm", "small", {"NC": 256}, noisy(0.96, 0.005, seed=3))]
    chosen = tuning.best(runs)["gemm"]
    assert chosen["config"] == tuning.DEFAULTS["gemm"]
    assert chosen["buckets"]["small"]["noise"] > 0.1


def test_best_refuses_one_config_that_is_slower_on_another_bucket():
    fast = {"KC": 512}
    runs = [result("gemm", "small", {}, noisy(1.0, 0.01)), result("gemm", "small", fast, noisy(0.5, 0.01)),
            result("gemm", "large", {}, noisy(1.0, 0.01)), result("gemm", "large", fast, noisy(1.3, 0.01))]
    chosen = tuning.best(runs)["gemm"]
    assert chosen["buckets"]["small"]["config"]["KC"] == 512   # the bucket's own choice
    assert chosen["config"] == tuning.DEFAULTS["gemm"]          # but not for the kernel


def test_best_needs_the_default_measured():
    with pytest.raises(tuning.TuningError, match="no measurement of the default config"):
        tuning.best([result("gemv", "row-1m", {"PARALLEL_MIN_MACS": 0}, [1.0, 1.1])])


def test_write_table_keeps_other_kernels_and_reads_back(tmp_path):
    path = tmp_path / "host.json"
    tuning.write_table("host", {"threads": {"SPIN_ROUNDS": 50}}, path=path)
    runs = [result("gemm", "small", {}, noisy(1.0, 0.01)), result("gemm", "small", {"KC": 128}, noisy(0.8, 0.01))]
    tuning.write_table("host", tuning.best(runs), path=path)
    table = tuning.load_table("host", path)
    assert table == {"threads": {"SPIN_ROUNDS": 50}, "gemm": {**tuning.DEFAULTS["gemm"], "KC": 128}}
    doc = json.loads(path.read_text())
    assert doc["board"] == "host" and "small" in doc["measured"]["gemm"]["buckets"]
    assert [p.name for p in tmp_path.iterdir()] == ["host.json"]   # no temporary file left
    with pytest.raises(tuning.TuningError, match=r"chosen\.gemm\.NC: NC 100 is not a multiple"):
        tuning.write_table("host", {"gemm": {"NC": 100}}, path=path)
