"""Export a sentence-transformers model to ONNX once, and find the exported copy.

A BERT-family model (the bundled all-MiniLM-L6-v2 included) is written by
``bert_onnx.write_bert_onnx`` straight from its safetensors weights with
``onnx.helper``: no torch, under a second, and bit-identical to the torch export
(tests/embedding/test_bert_onnx.py).  Any other architecture falls back to torch
(``torch.onnx.export``, the TorchScript exporter, opset 17), which needs the
``torch`` extra.  Either graph returns ``last_hidden_state``; pooling and
normalisation are done by the caller in numpy from the model's own
``1_Pooling/config.json``.  Running an exported model imports neither.

Exports are cached by model fingerprint under ``embedding.onnx_dir`` (default
``$XDG_CACHE_HOME/codechunkd/onnx``).  The fp32 graph keeps its weights in a file of
their own beside it (``WEIGHTS_FILE``, ONNX external data), which onnxruntime maps rather
than parsing them out of the graph's protobuf and copying them.  An export is written into
a temporary directory beside its final place and renamed into it, with ``meta.json``
written last: a crash mid-export leaves only a ``.tmp-*`` directory, never a final
directory that looks complete.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codechunkd import logs, platform
from codechunkd.config.settings import EmbeddingSettings
from codechunkd.embedding.models import model_fingerprint, model_path
from codechunkd.errors import EmbeddingError

#: Bump when the exported graph changes shape or meaning: old exports are not reused.
EXPORT_FORMAT = 1
OPSET = 17
MODEL_FILE = "model.onnx"
WEIGHTS_FILE = f"{MODEL_FILE}.data"
"""The fp32 graph's weights, beside it: a session opens in ~0.08 CPU-s against ~0.3 with
them inside the graph, and holds ~40 MiB less (docs/operations.md, Measured).  An export
made before has them inside; the next start moves them out (``export_model``)."""
QUANTIZED_FILE = "model.int8.onnx"
META_FILE = "meta.json"

_export_lock = threading.Lock()
log = logs.get_logger("codechunkd.embedding")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelLayout:
    """Where a sentence-transformers model keeps what the ONNX path needs."""

    root: Path
    """The model directory."""
    transformer: Path
    """Directory of the transformer module (weights, ``config.json``, ``tokenizer.json``)."""
    pooling: dict[str, Any]
    """The pooling module's config (``1_Pooling/config.json``); empty means mean pooling."""
    do_lower_case: bool
    """Whether sentence-transformers lowercases texts before tokenizing."""

    @property
    def tokenizer_json(self) -> Path:
        for d in (self.transformer, self.root):
            if (d / "tokenizer.json").is_file():
                return d / "tokenizer.json"
        raise EmbeddingError(f"no tokenizer.json in {self.root}: the onnx backend needs one")


def model_layout(model: str) -> ModelLayout:
    """Read ``modules.json``: a transformer, an optional pooling and normalize, nothing else."""
    root = model_path(model)
    if root is None:
        raise EmbeddingError(
            f"the onnx backend needs a local model directory, got {model!r}; "
            "configure a path or use the torch backend"
        )
    transformer = root
    pooling: dict[str, Any] = {}
    modules_file = root / "modules.json"
    modules: list[dict[str, Any]] = (
        json.loads(modules_file.read_text()) if modules_file.is_file() else []
    )
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        where = root / str(module.get("path", ""))
        if kind == "Transformer":
            transformer = where
        elif kind == "Pooling":
            pooling = json.loads((where / "config.json").read_text())
        elif kind != "Normalize":
            raise EmbeddingError(
                f"model {model!r} has a {kind} module the onnx backend does not reproduce; "
                "use the torch backend"
            )
    lower = False
    for d in (transformer, root):
        cfg = d / "sentence_bert_config.json"
        if cfg.is_file():
            lower = bool(json.loads(cfg.read_text()).get("do_lower_case", False))
            break
    return ModelLayout(root=root, transformer=transformer, pooling=pooling, do_lower_case=lower)


def default_onnx_dir() -> Path:
    """``$XDG_CACHE_HOME/codechunkd/onnx``, else in ``~/.cache`` (macOS: ``~/Library/Caches``)."""
    return platform.user_dir("cache") / "codechunkd" / "onnx"


def onnx_dir(settings: EmbeddingSettings) -> Path:
    """The directory that holds every cached export."""
    return Path(settings.onnx_dir).expanduser() if settings.onnx_dir else default_onnx_dir()


def export_dir(settings: EmbeddingSettings, fingerprint: str) -> Path:
    """Cache directory of one model: its fingerprint, made safe as a file name."""
    safe = "".join(c if c.isalnum() or c in "-_.@" else "_" for c in fingerprint)
    digest = hashlib.sha256(f"{fingerprint}|{EXPORT_FORMAT}|{OPSET}".encode()).hexdigest()[:8]
    return onnx_dir(settings) / f"{safe}-{digest}"


def cached_model(settings: EmbeddingSettings, fingerprint: str) -> Path | None:
    """The exported ``.onnx`` file for these settings if a complete export is cached."""
    folder = export_dir(settings, fingerprint)
    name = QUANTIZED_FILE if settings.quantized else MODEL_FILE
    needed = (META_FILE, name) if settings.quantized else (META_FILE, name, WEIGHTS_FILE)
    if all((folder / f).is_file() for f in needed):
        return folder / name
    return None


def earlier_export(settings: EmbeddingSettings, fingerprint: str) -> Path | None:
    """A complete fp32 export of the layout before ``WEIGHTS_FILE`` (its weights inside the
    graph), if that is what is cached: usable as it is, where the cache cannot be written
    to convert it (a cache a system unit only reads)."""
    folder = export_dir(settings, fingerprint)
    if settings.quantized or (folder / WEIGHTS_FILE).exists():
        return None
    if (folder / META_FILE).is_file() and (folder / MODEL_FILE).is_file():
        return folder / MODEL_FILE
    return None


def export_model(settings: EmbeddingSettings, *, force: bool = False) -> Path:
    """Export the configured model to ONNX (if not cached yet) and return the ``.onnx`` file.

    This is what ``codechunkd model export`` runs; the ``onnx`` backend calls it by
    itself on first use when nothing is cached.  With
    ``settings.quantized`` the int8 copy is made too.  ``force`` re-exports.
    """
    fingerprint = model_fingerprint(settings.model)
    with _export_lock:
        if not force:
            found = cached_model(settings, fingerprint)
            if found is not None:
                return found
        final = export_dir(settings, fingerprint)
        layout = model_layout(settings.model)
        final.parent.mkdir(parents=True, exist_ok=True)
        with _staging(final) as tmp:
            kept = (final / MODEL_FILE).is_file() and (final / META_FILE).is_file() and not force
            if kept:
                # a complete export lacking the int8 copy, or made with its weights inside:
                # kept, with the layout measured for it (embed_onnx's calibration cache)
                for f in final.iterdir():
                    if f.is_file() and f.name != META_FILE:
                        shutil.copy2(f, tmp / f.name)
            if not kept or not _weights_apart(tmp / MODEL_FILE):
                _export_fp32(layout, tmp / MODEL_FILE)
                _move_weights_out(tmp / MODEL_FILE)
            if settings.quantized:
                _quantize(tmp / MODEL_FILE, tmp / QUANTIZED_FILE)
            meta = {
                "model": settings.model,
                "fingerprint": fingerprint,
                "format": EXPORT_FORMAT,
                "opset": OPSET,
                "quantized": settings.quantized,
            }
            (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
        found = cached_model(settings, fingerprint)
        if found is None:  # pragma: no cover - _staging either renames or raises
            raise EmbeddingError(f"export of {settings.model!r} left no model in {final}")
        return found


def export_in_subprocess(settings: EmbeddingSettings, *, timeout: float = 900.0) -> Path:
    """``export_model`` in a child Python, so this process never imports torch or onnx.

    The daemon and ``codechunkd search`` use this on first use: a model that needs the
    torch fallback keeps torch's slow import and its hundreds of MB in a process that
    exits when the export is done, and the weights read for the graph go with it.
    """
    argv = [sys.executable, "-m", "codechunkd.embedding.onnx_export", "--model", settings.model]
    if settings.onnx_dir:
        argv += ["--onnx-dir", settings.onnx_dir]
    if settings.quantized:
        argv.append("--quantized")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EmbeddingError(f"cannot run the ONNX export of {settings.model!r}: {exc}") from exc
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        raise EmbeddingError(
            f"ONNX export of {settings.model!r} failed: {lines[-1] if lines else done.returncode}"
        )
    return Path(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    """``python -m codechunkd.embedding.onnx_export``: export one model, print its path."""
    import argparse

    parser = argparse.ArgumentParser(description="Export a model to ONNX for codechunkd.")
    parser.add_argument("--model", default=EmbeddingSettings().model)
    parser.add_argument("--onnx-dir", default="")
    parser.add_argument("--quantized", action="store_true")
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    settings = EmbeddingSettings(
        backend="onnx", model=args.model, onnx_dir=args.onnx_dir, quantized=args.quantized
    )
    try:
        path = export_model(settings, force=args.force)
    except EmbeddingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(path)
    return 0


@contextlib.contextmanager
def _staging(final: Path) -> Iterator[Path]:
    """A temporary directory beside ``final`` that replaces it atomically on success."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    tmp.chmod(0o755)  # mkdtemp makes it 0700; the cache may be shared by a system unit
    try:
        yield tmp
        for f in tmp.iterdir():
            with f.open("rb") as fh:
                os.fsync(fh.fileno())
        old = final.with_name(f".{final.name}.old-{os.getpid()}-{threading.get_ident()}")
        with contextlib.suppress(FileNotFoundError):
            final.rename(old)  # a forced re-export, or a complete export lacking the int8 copy
        try:
            tmp.rename(final)
        except OSError:
            # Another process renamed its own complete export into place first.
            if not (final / META_FILE).is_file():
                raise
        shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _export_fp32(layout: ModelLayout, target: Path) -> None:
    """Write the fp32 graph: built from the weights when the model is a BERT, else traced."""
    from codechunkd.embedding.bert_onnx import write_bert_onnx

    t0 = time.monotonic()
    try:
        write_bert_onnx(layout.transformer, target)
    except EmbeddingError as first:
        if importlib.util.find_spec("torch") is None:
            raise
        try:
            _export_torch(layout, target)
        except EmbeddingError as second:
            raise EmbeddingError(f"{first}; the torch export failed too: {second}") from second
        how = "torch"
    else:
        how = "onnx.helper"
    log.info(
        "model_exported", model=str(layout.root), how=how, seconds=round(time.monotonic() - t0, 2)
    )


def _weights_apart(model_file: Path) -> bool:
    """Whether a kept graph has, or now has, its weights beside it; False for one whose
    weights file is gone (it is exported again)."""
    if model_file.with_name(WEIGHTS_FILE).is_file():
        return True
    try:
        _move_weights_out(model_file)
    except EmbeddingError as exc:
        log.warning("model_export_damaged", model=str(model_file), error=str(exc)[:300])
        return False
    return True


def _move_weights_out(model_file: Path) -> None:
    """Rewrite ``model_file`` with its weights in ``WEIGHTS_FILE`` beside it (one file, every
    tensor of 1 KiB or more); the graph and the arithmetic are unchanged."""
    import onnx

    try:
        model = onnx.load(str(model_file))
        onnx.save_model(
            model,
            str(model_file),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=WEIGHTS_FILE,
            size_threshold=1024,
        )
    except Exception as exc:
        raise EmbeddingError(f"cannot write the weights of {model_file} apart: {exc}") from exc


def _export_torch(layout: ModelLayout, target: Path) -> None:
    """Trace the transformer with torch (the ``torch`` extra) and write the graph to ``target``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch
        from transformers import AutoModel
    except ImportError as exc:
        raise EmbeddingError(f"exporting to ONNX needs torch and transformers: {exc}") from exc

    try:
        # Eager attention traces to plain ops; the example batch is padded so the
        # traced graph keeps the attention-mask path.
        model = AutoModel.from_pretrained(str(layout.transformer), attn_implementation="eager")
        model.eval()
        takes_types = "token_type_ids" in inspect.signature(model.forward).parameters

        class LastHiddenState(torch.nn.Module):
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, *args: Any) -> Any:
                names = ["input_ids", "attention_mask", "token_type_ids"][: len(args)]
                return self.inner(**dict(zip(names, args, strict=True))).last_hidden_state

        ids = torch.full((2, 8), 100, dtype=torch.long)
        mask = torch.ones_like(ids)
        mask[1, 5:] = 0
        inputs: tuple[Any, ...] = (ids, mask)
        names = ["input_ids", "attention_mask"]
        if takes_types:
            inputs = (*inputs, torch.zeros_like(ids))
            names.append("token_type_ids")
        axes = {n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]}
        with warnings.catch_warnings(), torch.no_grad():
            # The TorchScript exporter warns about itself and about traced shape checks;
            # the exported graph is checked against sentence-transformers by the tests.
            warnings.simplefilter("ignore")
            torch.onnx.export(
                LastHiddenState(model),
                inputs,
                str(target),
                dynamo=False,
                opset_version=OPSET,
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
            )
    except EmbeddingError:
        raise
    except Exception as exc:
        raise EmbeddingError(f"cannot export {layout.root} to ONNX: {exc}") from exc


def _quantize(source: Path, target: Path) -> None:
    """Dynamic int8 quantization of the weights (onnxruntime's quantizer)."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        # The quantizer warns through the root logger (pre-processing advice) and warnings.
        logging.disable(logging.WARNING)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8)
        finally:
            logging.disable(logging.NOTSET)
    except Exception as exc:
        raise EmbeddingError(f"cannot quantize {source}: {exc}") from exc


if __name__ == "__main__":
    sys.exit(main())
