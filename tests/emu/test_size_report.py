"""scripts/size_report.py: the runtime core's size table, with a Cortex-M4 row
whose .text is within the 8 KB goal."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^(?P<board>\S+)\s+(?P<target>.+?)\s+(?P<text>\d+)\s+(?P<data>\d+)\s+(?P<bss>\d+)$")


def test_size_report_has_a_cortex_m4_row():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "size_report.py")], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = {m["board"]: m for m in map(ROW.match, proc.stdout.splitlines()) if m}
    assert "qemu-cortex-m4" in rows, proc.stdout
    m4 = rows["qemu-cortex-m4"]
    assert m4["target"].startswith("arm-none-eabi")
    text, data, bss = int(m4["text"]), int(m4["data"]), int(m4["bss"])
    assert 1000 < text < 8 * 1024, proc.stdout
    assert data + bss < 1024, proc.stdout
    assert f"Cortex-M4 .text: {text} bytes" in proc.stdout
    assert "8 KB goal" in proc.stdout and "TFLite Micro" in proc.stdout
