"""`relax-edge compile --stages`: the wall time of each build stage, in the
order the build runs them, adding up to the printed total."""

import re

from relax_edge.cli import main
from tests.onnx_models import get_model

STAGES = ["import", "optimize", "plan_memory", "lower_host", "emit", "toolchain"]
ROW = re.compile(r"^    (\w+)\s+([0-9.]+) s(?:\s+([0-9.]+)%)?$")


def stage_rows(out: str) -> dict:
    block = out[out.index("  stages"):]
    return {m[1]: float(m[2]) for m in map(ROW.match, block.splitlines()[1:]) if m}


def test_stages_in_order_and_adding_up(tmp_path, capsys):
    path, _ = get_model("mlp")
    assert main(["compile", str(path), "--board", "host", "-o", str(tmp_path / "mlp"), "--stages"]) == 0
    out, err = capsys.readouterr()
    rows = stage_rows(out)
    assert list(rows) == STAGES + ["total"]
    assert all(seconds >= 0 for seconds in rows.values())
    assert abs(sum(rows[s] for s in STAGES) - rows["total"]) <= 0.001 * len(STAGES)
    for stage in STAGES[1:]:   # each build stage is also reported as it ends
        assert f"stage {stage}:" in err


def test_an_up_to_date_build_has_no_toolchain_stage(tmp_path, capsys):
    path, _ = get_model("mlp")
    argv = ["compile", str(path), "--board", "host", "-o", str(tmp_path / "mlp"), "--stages"]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(argv) == 0
    out, _ = capsys.readouterr()
    assert "up to date" in out
    assert list(stage_rows(out)) == STAGES[:-1] + ["total"]


def test_without_the_flag_no_table(tmp_path, capsys):
    path, _ = get_model("mlp")
    assert main(["compile", str(path), "--board", "host", "-o", str(tmp_path / "mlp")]) == 0
    assert "  stages" not in capsys.readouterr().out
