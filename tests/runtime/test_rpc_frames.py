"""The RPC frame parser and handlers on a corpus of malformed frames under
AddressSanitizer + UndefinedBehaviorSanitizer, and a short libFuzzer run of
the fuzz target (scripts/fuzz_rpc.sh runs it for longer)."""

import random
import struct
import subprocess

import numpy as np

from relax_edge.build import RUNTIME_DIR
from relax_edge.deploy import tensorfile

ROOT = RUNTIME_DIR.parent
SOURCES = [RUNTIME_DIR / "fuzz" / "rpc_fuzz.c", RUNTIME_DIR / "rpc" / "protocol.c",
           *[RUNTIME_DIR / "src" / s for s in ("status.c", "check.c", "module.c")]]


def frame(kind, payload=b"", length=None, magic=b"RX", flags=0):
    return magic + bytes([kind, flags]) + struct.pack("<I", len(payload) if length is None else length) + payload


def corpus():
    good_tensor = tensorfile.encode([np.ones(4, np.float32)])[8:]
    hello = frame(1, struct.pack("<I", 1))
    yield "valid_session", hello + frame(4, struct.pack("<I", 0) + good_tensor) + frame(5) + \
        frame(6, struct.pack("<I", 0)) + frame(7, struct.pack("<III", 1, 3, 0)) + frame(8) + \
        frame(9, struct.pack("<q", 5)) + frame(10)
    yield "bad_magic", b"XX" + hello[2:]
    yield "bad_flags", frame(1, struct.pack("<I", 1), flags=7)
    yield "huge_length", frame(4, b"", length=0xFFFFFFFF)
    yield "length_past_end", frame(4, b"\x00" * 10, length=5000)
    yield "truncated_header", b"RX\x01"
    yield "wrong_version", frame(1, struct.pack("<I", 99))
    yield "set_input_huge_dims", frame(4, struct.pack("<I", 0) + b"\x02\x20\x02\x00" + struct.pack("<qq", 2**40, 2**40))
    yield "set_input_negative_dim", frame(4, struct.pack("<I", 0) + b"\x02\x20\x01\x00" + struct.pack("<q", -3))
    yield "set_input_rank_9", frame(4, struct.pack("<I", 0) + b"\x02\x20\x09\x00" + b"\x01" * 72)
    yield "set_input_bad_bits", frame(4, struct.pack("<I", 0) + b"\x02\x03\x01\x00" + struct.pack("<q", 1) + b"x")
    yield "set_input_index_out_of_range", frame(4, struct.pack("<I", 4000) + good_tensor)
    yield "set_input_short_data", frame(4, struct.pack("<I", 0) + good_tensor[:-3])
    yield "set_input_wrong_dtype_then_run", frame(4, struct.pack("<I", 0) + b"\x00\x40\x01\x00" +
                                                   struct.pack("<q", 2) + b"\x00" * 16) + frame(5) + frame(8)
    yield "get_output_before_run", frame(6, struct.pack("<I", 0))
    yield "time_extremes", frame(4, struct.pack("<I", 0) + good_tensor) + frame(7, struct.pack("<III", 10**9, 10**9, 10**9))
    yield "workspace_wrong_count", frame(9, struct.pack("<qq", 1, 2)) + frame(9, struct.pack("<q", -5))
    yield "select_long_name", frame(3, struct.pack("<I", 1000) + b"a" * 1000) + frame(3, struct.pack("<I", 4) + b"main")
    yield "select_bad_length", frame(3, struct.pack("<I", 0xFFFFFFFF))
    yield "unknown_types", b"".join(frame(k) for k in (0, 11, 128, 255))
    rng = random.Random(0)
    for k in range(40):
        yield f"random_{k}", bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300)))
        prefix = frame(rng.choice([4, 7, 9, 3, 6]), bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64))))
        yield f"random_frame_{k}", prefix


def test_malformed_frames_under_sanitizers(tmp_path):
    exe = tmp_path / "rpc_corpus"
    flags = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
    subprocess.run(["gcc", "-std=c99", "-g", "-O1", *flags, f"-I{RUNTIME_DIR / 'include'}", *map(str, SOURCES),
                    "-o", str(exe)], check=True)
    files = []
    for name, data in corpus():
        path = tmp_path / f"{name}.bin"
        path.write_bytes(data)
        files.append(str(path))
    proc = subprocess.run([str(exe), *files], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"RXE_CORPUS_OK {len(files)}" in proc.stdout
    assert "ERROR: AddressSanitizer" not in proc.stderr and "runtime error" not in proc.stderr


def test_libfuzzer_short_run():
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "fuzz_rpc.sh"), "5"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "stat::number_of_executed_units" in proc.stdout
    assert "ERROR" not in proc.stdout
