"""``codechunkd model export``: export the configured embedding model to ONNX now.

Owns the command's parser and report.  The export is ``embedding.onnx_export``, imported
inside ``cmd_model`` alone (it may import torch); nothing else here loads a model.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import codechunkd.cli.common as common


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("model", help="manage the embedding model")
    model_sub = p.add_subparsers(dest="model_command", required=True, metavar="ACTION")
    p = model_sub.add_parser(
        "export", help="export the configured model to ONNX now (otherwise done at first use)"
    )
    p.add_argument("--force", action="store_true", help="export again even when cached")
    common.options(p)


def cmd_model(args: argparse.Namespace) -> int:
    from codechunkd.embedding.onnx_export import export_model

    settings = common.settings(args)
    started = time.monotonic()
    path = export_model(settings.embedding, force=args.force)
    doc = {
        "model": settings.embedding.model,
        "onnx": str(path),
        "seconds": round(time.monotonic() - started, 1),
    }
    if args.json:
        common.print_json(doc)
    else:
        print(f"exported {doc['model']} to {doc['onnx']} in {doc['seconds']} s")
    return 0
