"""Farm file validation: every mistake named with its field (no Ray, no boards reached), and sequences of
hostile edits (hypothesis), to the loaded mapping and to the file's text: each gives a Farm or a FarmError
naming the file, never another exception."""

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relax_edge.farm import FarmError, load_farm, parse_farm
from relax_edge.target import BOARDS_DIR


def test_a_farm_of_emulator_slots_ssh_and_phones(tmp_path):
    pi = tmp_path / "lab-pi.yaml"
    data = yaml.safe_load((BOARDS_DIR / "raspberry-pi-4.yaml").read_text())
    pi.write_text(yaml.safe_dump({**data, "name": "lab-pi"}))
    path = tmp_path / "farm.yaml"
    path.write_text(yaml.safe_dump({"ray": "ray://head.lab:10001", "boards": {"qemu-aarch64": 2, "host": 1},
                                    "ssh": ["raspberry-pi-5", "lab-pi.yaml"],
                                    "android": {"android-arm64": ["R58M1", "emulator-5554"]}}, sort_keys=False))
    farm = load_farm(path)
    assert farm.ray == "ray://head.lab:10001"
    assert [(b.name, b.slots, b.physical) for b in farm.boards] == [
        ("qemu-aarch64", 2, False), ("host", 1, False), ("raspberry-pi-5", 1, True), ("lab-pi", 1, True),
        ("android-arm64@R58M1", 1, True), ("android-arm64@emulator-5554", 1, True)]
    phone = farm.board("android-arm64@R58M1")
    assert phone.board.adb["serial"] == "R58M1" and phone.board.name == "android-arm64"
    assert phone.resource == "board:android-arm64@R58M1"
    assert [b.name for b in farm.select(["lab-pi", "qemu-aarch64"])] == ["qemu-aarch64", "lab-pi"]
    assert len(farm.select("all")) == 6


@pytest.mark.parametrize("data, message", [
    ({"boards": {"qemu-aarch64": 2}, "slots": 3}, "unknown field 'slots'"),
    ({"boards": {"qemu-aarch64": 0}}, "boards.qemu-aarch64: slots must be a positive integer, got 0"),
    ({"boards": {"qemu-aarch64": True}}, "slots must be a positive integer, got True"),
    ({"boards": {"raspberry-pi-4": 2}}, "boards.raspberry-pi-4: a ssh board runs one job at a time"),
    ({"boards": {"no-such-board": 1}}, "boards.no-such-board: unknown board 'no-such-board'"),
    ({"ssh": ["qemu-aarch64"]}, "ssh[0]: board qemu-aarch64 has transport qemu, not ssh"),
    ({"ssh": "raspberry-pi-4"}, "field 'ssh' must be a list"),
    ({"android": {"android-arm64": []}}, "android.android-arm64: give a list of device serials"),
    ({"android": {"qemu-aarch64": ["x"]}}, "transport qemu, not adb"),
    ({"boards": {"qemu-aarch64": 1}, "ray": "tcp://x"}, "field 'ray' is 'tcp://x'; use local, auto or ray://"),
    ({"boards": {"qemu-aarch64": 1}, "ray": "ray://head:99999"}, "field 'ray' is 'ray://head:99999'"),
    ({"boards": {"qemu-aarch64": 1}, "ray": "ray://head:10001\n"}, "field 'ray' is 'ray://head:10001\\n'"),
    ({"boards": {"qemu-aarch64": 1}, "ray": 10001}, "field 'ray' must be a str, got 10001"),
    ({"boards": {"qemu-aarch64": 1}, "num_cpus": 1.5}, "field 'num_cpus' must be an integer, got 1.5"),
    ({"boards": {"qemu-aarch64": 1, 7: 1}}, "boards.7: a board is a board name or a YAML path, got 7"),
    ({"boards": {"qemu-aarch64": "2"}}, "boards.qemu-aarch64: slots must be a positive integer, got '2'"),
    ({"ssh": [None]}, "ssh[0]: a board is a board name or a YAML path, got None"),
    ({"android": {"android-arm64": "R58M1"}}, "android.android-arm64: give a list of device serials"),
    ({"android": {"android-arm64": ["R58M1", ""]}}, "android.android-arm64: give a list of device serials"),
    ({"android": {"android-arm64": ["R58M1", "R58M1"]}}, "board android-arm64@R58M1 is listed twice"),
    ({"boards": {"qemu-aarch64": 1}, "num_cpus": 0}, "field 'num_cpus' must be at least 1"),
    ({"boards": {"raspberry-pi-4": 1}, "ssh": ["raspberry-pi-4"]}, "board raspberry-pi-4 is listed twice"),
    ({"ray": "local"}, "the farm has no boards"),
    (["qemu-aarch64"], "expected a mapping"),
])
def test_invalid_farms_name_the_field(data, message):
    with pytest.raises(FarmError) as err:
        parse_farm(data, "farm.yaml")
    assert message in str(err.value) and str(err.value).startswith("farm.yaml")


def test_unknown_board_of_a_selection_and_bad_files(tmp_path):
    farm = parse_farm({"boards": {"qemu-aarch64": 1}}, "farm.yaml")
    with pytest.raises(FarmError, match="no board 'pi' in this farm"):
        farm.select(["pi"])
    with pytest.raises(FarmError, match="no such farm file"):
        load_farm(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("boards: {qemu-aarch64: 2\n")
    with pytest.raises(FarmError, match=r"not valid YAML \(.*line 2"):
        load_farm(bad)


def test_farm_command_errors_make_no_database(tmp_path, monkeypatch, capsys):
    from relax_edge.cli import main
    monkeypatch.chdir(tmp_path)
    assert main(["farm"]) == 2
    assert main(["farm", "bench", "--models", "a.onnx"]) == 1
    farm = tmp_path / "farm.yaml"
    farm.write_text("boards: {qemu-aarch64: 1}\n")
    assert main(["farm", "bench", "--farm", farm, "--models", "missing.onnx"]) == 1
    assert main(["farm", "bench", "--farm", farm, "--models", farm, "--boards", "pi"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == ["relax-edge: error: choose a farm command: bench or report (see relax-edge farm --help)",
                   "relax-edge: error: give the farm file (farm=... or --farm farm.yaml)",
                   "relax-edge: error: missing.onnx: no such model file",
                   f"relax-edge: error: {farm}: no board 'pi' in this farm (boards: qemu-aarch64)"]
    assert not (tmp_path / "results.db").exists()


def test_tuning_candidates_and_knob_options():
    from relax_edge import tuning
    from relax_edge.farm.cli import parse_knobs
    from relax_edge.farm.tune import candidates, tune
    default = tuning.DEFAULTS["gemm"]
    knobs = parse_knobs(["gemm.KC=16,256", "gemm.NC=1024"])
    assert knobs == {"gemm": {"KC": [16, 256], "NC": [1024]}}
    assert candidates("gemm", knobs) == [default, {**default, "KC": 16}, {**default, "NC": 1024}]
    with pytest.raises(tuning.TuningError, match="KC 5000 is outside"):
        candidates("gemm", {"gemm": {"KC": [5000]}})
    with pytest.raises(FarmError, match="give KERNEL.KNOB=V1,V2"):
        parse_knobs(["gemm.KC=big"])
    farm = parse_farm({"boards": {"qemu-aarch64": 1}}, "farm.yaml")
    with pytest.raises(FarmError, match="a table records only those"):
        tune(farm, buckets={"gemm": [{"name": "mine", "op": "dense", "m": 4, "n": 8, "k": 8}]})
    with pytest.raises(FarmError, match="unknown kernel 'conv3d'"):
        tune(farm, kernels=["conv3d"])


def test_unreadable_board_and_farm_files_are_named(tmp_path):
    binary = tmp_path / "phone.yaml"
    binary.write_bytes(b"\xff\xfe\x00name: phone\n")
    with pytest.raises(FarmError, match=r"farm.yaml: ssh\[0\]: .*phone.yaml: not a text file \(byte 0 is not UTF-8\)"):
        parse_farm({"ssh": [str(binary)]}, str(tmp_path / "farm.yaml"))
    (tmp_path / "folder.yaml").mkdir()
    with pytest.raises(FarmError, match="folder.yaml: not a file"):
        parse_farm({"boards": {str(tmp_path / "folder.yaml"): 1}}, str(tmp_path / "farm.yaml"))
    with pytest.raises(FarmError, match=r"bin-farm.yaml: not a text file \(byte 3 is not UTF-8\)"):
        (tmp_path / "bin-farm.yaml").write_bytes(b"ray\xff: local\n")
        load_farm(tmp_path / "bin-farm.yaml")


VALID = {"ray": "local", "num_cpus": 2, "boards": {"qemu-aarch64": 2, "qemu-riscv64": 1},
         "ssh": ["raspberry-pi-4"], "android": {"android-arm64": ["R58M1", "emulator-5554"]}}
HOSTILE = [None, 0, -1, 1, 2, 2 ** 70, True, 1.5, "", "x", "qemu-aarch64", "raspberry-pi-4", "android-arm64",
           "auto", "ray://h:1", "ray://h:0", "../up.yaml", "/etc/passwd", "/", "a.yaml", [], [1], [None],
           ["qemu-aarch64"], ["raspberry-pi-4", "raspberry-pi-4"], {}, {"a": 1}, {1: 2}, {"qemu-aarch64": "2"},
           {"android-arm64": [None]}, {"android-arm64": "R58"}, {"raspberry-pi-4": 1}, "boards", "slots"]
_KEYS = [*VALID, "slots", 0, None, True]


def _edit(data, path: list, value, delete: bool):
    """`data` with the value at `path` (keys and list indices, taken modulo what exists) replaced or deleted."""
    if not path or not isinstance(data, (dict, list)) or not data:
        return value
    if isinstance(data, dict):
        keys = list(data)
        key = path[0] if not isinstance(path[0], int) else keys[path[0] % len(keys)]
        out = dict(data)
        if delete and len(path) == 1:
            out.pop(key, None)
        else:
            out[key] = _edit(data.get(key), path[1:], value, delete)
        return out
    out = list(data)
    i = (path[0] if isinstance(path[0], int) else 0) % len(out)
    if delete and len(path) == 1:
        del out[i]
    else:
        out[i] = _edit(out[i], path[1:], value, delete)
    return out


_EDITS = st.lists(st.tuples(st.lists(st.one_of(st.integers(0, 5), st.sampled_from(_KEYS)), max_size=3),
                            st.sampled_from(HOSTILE), st.booleans()), min_size=1, max_size=5)


def _named(err: FarmError, path: str) -> None:
    text = str(err)
    assert text.startswith(path) and len(text) > len(path) + 10, text


@settings(max_examples=250, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(edits=_EDITS)
def test_sequences_of_bad_edits_give_a_farm_or_a_named_error(edits):
    data = VALID
    for path, value, delete in edits:
        data = _edit(data, path, value, delete)
    try:
        farm = parse_farm(data, "lab/farm.yaml")
    except FarmError as err:
        _named(err, "lab/farm.yaml")
        return
    assert farm.boards and all(b.slots >= 1 for b in farm.boards)


@settings(max_examples=200, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.tuples(st.integers(0, 10 ** 6), st.sampled_from(
    ["", ":", "{", "}", "[", "]", "- ", "\n", "\t", "'", '"', "&a", "*a", "!!python/object:os.system", "%", "@", "`",
     "|", ">", "#", ",", "?", "\x00", "\udcff", "\ufeff", "0", "-1", "boards", "ray"])), min_size=1, max_size=6))
def test_sequences_of_text_edits_give_a_farm_or_a_named_error(tmp_path, cuts):
    text = yaml.safe_dump(VALID, sort_keys=False)
    for at, insert in cuts:
        at %= len(text) + 1
        text = text[:at] + insert + text[at + (1 if insert == "" else 0):]
    path = tmp_path / "farm.yaml"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    try:
        farm = load_farm(path)
    except FarmError as err:
        _named(err, str(path))
        return
    assert farm.boards and all(b.slots >= 1 for b in farm.boards)
