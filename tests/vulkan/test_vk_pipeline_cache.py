"""The optional pipeline cache file (rxe_vk_options_t.pipeline_cache,
RXE_VK_PIPELINE_CACHE, `dev.load(art, pipeline_cache=PATH)`): the first
load writes it (a checksummed frame around the driver's data, whose header
names this device), the second seeds the driver's cache from it, and a
short, corrupt, truncated or foreign file never reaches the driver: it is
ignored with a line naming the file and the reason, and replaced. Outputs
are the same bits in every case, and the validation layer stays clean."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.errors import RelaxEdgeError
from relax_edge.ir import Builder, SizeVar, TensorType, Var
from tests.vulkan import vkrt

MAGIC = b"RXVKPC1\0"


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    reason = vkrt.unavailable()
    if reason is not None:
        pytest.skip(reason)
    x = Var("x", TensorType((SizeVar("n", upper=4096), 24), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(op.softmax(op.tanh(op.multiply(x, np.float32(0.5))), axis=-1))
        bb.ret(out)
    return rxe.build(bb.get(), board="host-vulkan", backend="vulkan", out_dir=tmp_path_factory.mktemp("vk_cache"),
                     profile=False)


def _reference(x):
    t = np.tanh(x.astype(np.float64) * 0.5)
    e = np.exp(t - t.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


X = np.random.default_rng(5).standard_normal((37, 24)).astype("float32")


def _load_run(art, cache):
    """(output, the load's cache report and device name) of one load with the validation layer on."""
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art, pipeline_cache=None if cache is None else str(cache))
        (y,) = m.run(X)
        report = {**m.pipeline_cache(), "device": m.device_name}
        count, first = m.validation_messages()
        if vkrt.validation_installed():
            assert count == 0, first
    np.testing.assert_allclose(y, _reference(X), rtol=2e-5, atol=1e-6)
    return y, report


def _ids():
    """(vendorID, deviceID) of the device the board opens, from vulkaninfo (None when it is not installed)."""
    if shutil.which("vulkaninfo") is None:
        return None
    vkrt.pin_driver()
    text = subprocess.run(["vulkaninfo", "--summary"], capture_output=True, text=True, timeout=60).stdout
    found = [int(re.search(rf"{key}\s*=\s*(0x[0-9a-fA-F]+)", text).group(1), 16) for key in ("vendorID", "deviceID")]
    return tuple(found)


def _fnv1a(data: bytes) -> int:
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def _frame(data: bytes) -> bytes:
    return MAGIC + struct.pack("<II", len(data), _fnv1a(data)) + data


def _parse(path) -> bytes:
    """The driver's data of a cache file, its frame checked here."""
    raw = path.read_bytes()
    assert raw[:8] == MAGIC
    size, checksum = struct.unpack("<II", raw[8:16])
    data = raw[16:]
    assert size == len(data) and checksum == _fnv1a(data)
    header, version = struct.unpack("<II", data[:8])
    assert header >= 32 and version == 1   # VK_PIPELINE_CACHE_HEADER_VERSION_ONE
    return data


@pytest.fixture
def validated(monkeypatch):
    if vkrt.validation_installed():
        monkeypatch.setenv("RXE_VK_VALIDATION", "1")
    monkeypatch.delenv("RXE_VK_PIPELINE_CACHE", raising=False)


def test_first_load_writes_the_file_and_the_second_uses_it(artifact, tmp_path, validated):
    path = tmp_path / "pipelines.bin"
    y0, report = _load_run(artifact, None)
    assert (report["state"], report["text"]) == ("none", "")
    y1, report = _load_run(artifact, path)
    assert report["state"] == "created" and str(path) in report["text"] and "written" in report["text"]
    data = _parse(path)   # lavapipe keeps no compiled code in it: its data is the 32-byte header alone
    ids = _ids()
    assert ids is None or struct.unpack("<II", data[8:16]) == ids   # made for this device
    y2, report = _load_run(artifact, path)
    assert report["state"] == "used" and str(path) in report["text"], report
    if "llvmpipe" in report["device"]:   # lavapipe's data is the same header again: the file is left as it is
        assert report["text"].endswith("used (unchanged)"), report
    assert _parse(path)[:32] == data[:32]   # the same device and driver
    np.testing.assert_array_equal(y1, y0)
    np.testing.assert_array_equal(y2, y0)
    assert not list(tmp_path.glob("*.tmp.*"))   # written through a temporary file, renamed


def test_the_environment_names_the_file(artifact, tmp_path, validated, monkeypatch):
    path = tmp_path / "from-env.bin"
    monkeypatch.setenv("RXE_VK_PIPELINE_CACHE", str(path))
    _, report = _load_run(artifact, None)
    assert report["state"] == "created" and len(_parse(path)) >= 32
    _, report = _load_run(artifact, "")   # "" turns the file off, whatever the environment says
    assert (report["state"], report["text"]) == ("none", "")


def _foreign(data: bytes, offset: int) -> bytes:
    """A well-framed file whose driver header differs at `offset` (vendorID 8, deviceID 12, UUID 16)."""
    changed = bytearray(data)
    changed[offset] ^= 0x5A
    return _frame(bytes(changed))


@pytest.mark.parametrize("kind, reason", [
    ("empty", "is too short to be one"),
    ("garbage", "is not a relax_edge pipeline cache"),
    ("truncated", "is truncated or padded"),
    ("flipped", "is corrupt (its checksum does not match)"),
    ("vendor", "made for vendor 0x"),
    ("device", "made for vendor 0x"),
    ("uuid", "made by another driver build"),
    ("no_header", "the driver's header is missing"),
])
def test_a_bad_file_is_ignored_named_and_replaced(artifact, tmp_path, validated, capfd, kind, reason):
    path = tmp_path / "pipelines.bin"
    y0, _ = _load_run(artifact, path)
    good = path.read_bytes()
    data = _parse(path)
    bad = {"empty": b"", "garbage": bytes(range(256)) * 4, "truncated": good[:len(good) // 2],
           "flipped": good[:-1] + bytes([good[-1] ^ 1]), "vendor": _foreign(data, 8), "device": _foreign(data, 12),
           "uuid": _foreign(data, 16), "no_header": _frame(data[:20])}[kind]
    path.write_bytes(bad)
    capfd.readouterr()
    y1, report = _load_run(artifact, path)
    assert report["state"] == "rejected" and str(path) in report["text"] and reason in report["text"], report
    assert "written" in report["text"]
    assert reason in capfd.readouterr().err   # said on stderr too
    np.testing.assert_array_equal(y1, y0)
    assert _parse(path)[:32] == data[:32]   # replaced by this device's
    _, report = _load_run(artifact, path)
    assert report["state"] == "used"


def test_an_unwritable_file_does_not_fail_the_load(artifact, tmp_path, validated, capfd):
    path = tmp_path / "no-such-dir" / "pipelines.bin"
    y, report = _load_run(artifact, path)
    assert report["state"] == "created" and "not written: cannot create" in report["text"], report
    assert "No such file or directory" in report["text"] and "not written" in capfd.readouterr().err
    assert not path.parent.exists()


def test_a_cache_for_a_c_artifact_is_refused(tmp_path):
    from tests.models import build_mlp, mlp_weights
    art = rxe.build(build_mlp(mlp_weights()), board="host", out_dir=tmp_path, profile=False)
    with rxe.connect("host") as dev:
        with pytest.raises(RelaxEdgeError, match="a pipeline cache is for Vulkan artifacts; this one's backend is c"):
            dev.load(art, pipeline_cache=str(tmp_path / "x.bin"))
