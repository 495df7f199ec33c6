"""scripts/device_bench.sh's staging: the index's dependencies, too big for one device
call, travel as parts in several calls and are joined and unpacked once all are there.

The script runs here as a real process on a real xz-compressed tar, cut in two as
scripts/pack_index_deps.sh cuts its own; each call sees only the part it carried.
"""

from __future__ import annotations

import hashlib
import io
import lzma
import os
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "device_bench.sh"


def _pack(tmp: Path) -> tuple[Path, Path]:
    """Two carry folders holding one bundle (a package ``marker``) cut in two parts."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        body = os.urandom(4096)  # incompressible: both parts hold some of it
        info = tarfile.TarInfo("marker/__init__.py")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    packed = lzma.compress(buf.getvalue())
    first, second = tmp / "call1", tmp / "call2"
    first.mkdir()
    second.mkdir()
    half = len(packed) // 2
    (first / "part-00").write_bytes(packed[:half])
    (second / "part-01").write_bytes(packed[half:])
    (second / "parts").write_text("2\n")
    (second / "sha256").write_text(hashlib.sha256(packed).hexdigest() + "\n")
    return first, second


def _stage(carried: Path, parts: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEVICE_STAGE": "1", "DEVICE_DEPS_DIR": str(carried)}
    env["DEVICE_PARTS"] = str(parts)
    env["OUT"] = str(parts.parent / "out")  # the script's own default is /tmp/devout
    return subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_parts_carried_by_two_calls_are_unpacked_once_both_are_staged(tmp_path: Path) -> None:
    """The first call stages its part and unpacks nothing; the second brings the rest, and
    the bundle is unpacked where the bench's PYTHONPATH looks for it."""
    first, second = _pack(tmp_path)
    parts = tmp_path / "staged"
    one = _stage(first, parts)
    assert one.returncode == 0, one.stderr
    assert "part-00" in one.stdout and not (parts / "site").exists()
    two = _stage(second, parts)
    assert two.returncode == 0, two.stderr
    assert "unpacked" in two.stdout
    assert (parts / "site" / "marker" / "__init__.py").stat().st_size == 4096


def test_a_damaged_part_is_not_unpacked(tmp_path: Path) -> None:
    """A part that differs from what was packed (a transfer cut short): the sha256 check
    says so and nothing is unpacked."""
    first, second = _pack(tmp_path)
    part = first / "part-00"
    part.write_bytes(part.read_bytes()[:-1])
    parts = tmp_path / "staged"
    assert _stage(first, parts).returncode == 0
    two = _stage(second, parts)
    assert "sha256 differs" in two.stdout
    assert not (parts / "site").exists()
