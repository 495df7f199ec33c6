"""Write a BERT encoder as an ONNX graph straight from its weights, without torch.

The ``onnx`` backend needs the transformer as an ONNX graph once.  Tracing it with
``torch.onnx.export`` needs torch and transformers (hundreds of MB, seconds to
import) just to learn a graph whose shape BERT's ``config.json`` already fixes.
This module writes that graph by hand from ``model.safetensors`` (read with
``safetensors``' numpy API) with the same interface the torch export has: inputs
``input_ids``, ``attention_mask`` and ``token_type_ids`` (int64, [batch, sequence])
and the output ``last_hidden_state`` (float32, [batch, sequence, hidden]).

The arithmetic is HF ``BertModel``'s in eager mode, in the same order: embeddings
summed as word + token type, then + position, layer-normalised; scores
``(Q @ Kᵀ) * head_size ** -0.5`` plus the extended mask ``(1 - mask) * float32 min``,
softmax, ``@ V``; post-norm residual blocks; exact (erf) GELU.  Linear layers are
``MatMul`` with the transposed weight stored as an initializer, then ``Add`` of the
bias.  These are the torch export's ops in the torch export's order, so onnxruntime
optimises both graphs alike (FusedMatMul for the scaled scores, BiasGelu) and, for
all-MiniLM-L6-v2, they return bit-identical hidden states at the same speed.

Only what config.json can describe and this graph reproduces is accepted
(``model_type`` "bert", absolute positions, an encoder); anything else raises
``EmbeddingError`` pointing at the torch export, which handles every architecture.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from codechunkd.errors import EmbeddingError

#: LayerNormalization became a standard ONNX operator in opset 17.
MIN_OPSET = 17

#: Activations of HF's ACT2FN that are a few elementwise ops.
ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")

#: Weight-name prefixes of a bare ``BertModel`` and of a ``Bert*`` model with a head.
_PREFIXES = ("", "bert.")

#: protobuf cannot serialise a single message over 2 GiB (the weights live inside it).
_MAX_PROTO_BYTES = 2**31 - 2**20

#: ``BertConfig``'s defaults: HF fills a key config.json leaves out with these.
_DEFAULTS: dict[str, int | float | str] = {
    "vocab_size": 30522,
    "hidden_size": 768,
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "intermediate_size": 3072,
    "hidden_act": "gelu",
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
}

Array = npt.NDArray[Any]
Attribute = int | float | Sequence[int]


@dataclass(frozen=True, slots=True, kw_only=True)
class BertConfig:
    """The part of a BERT ``config.json`` that decides the encoder graph."""

    vocab_size: int
    hidden_size: int
    num_attention_heads: int
    num_hidden_layers: int
    intermediate_size: int
    hidden_act: str
    layer_norm_eps: float
    max_position_embeddings: int
    type_vocab_size: int

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads


def write_bert_onnx(transformer_dir: Path, target: Path, *, opset: int = MIN_OPSET) -> None:
    """Write the encoder of the BERT in ``transformer_dir`` to ``target`` as ONNX.

    ``transformer_dir`` holds ``config.json`` and ``model.safetensors`` (or its
    sharded form); the graph returns ``last_hidden_state`` and leaves pooling to
    the caller, as the torch export does.  Raises ``EmbeddingError`` for a model
    this graph would not reproduce exactly.
    """
    if not MIN_OPSET <= opset <= onnx.defs.onnx_opset_version():
        raise EmbeddingError(
            f"cannot write an ONNX graph at opset {opset}: the torch-free export needs "
            f"{MIN_OPSET}..{onnx.defs.onnx_opset_version()}"
        )
    config = read_config(transformer_dir)
    graph = _Graph(_load_weights(transformer_dir), transformer_dir)
    hidden = _embeddings(graph, config)
    bias = _attention_bias(graph)
    for layer in range(config.num_hidden_layers):
        last = layer == config.num_hidden_layers - 1
        hidden = _self_attention(graph, hidden, bias, config, layer)
        hidden = _feed_forward(
            graph, hidden, config, layer, output="last_hidden_state" if last else None
        )
    if graph.weight_bytes > _MAX_PROTO_BYTES:
        raise _unsupported(
            transformer_dir,
            f"{graph.weight_bytes / 2**30:.1f} GiB of weights (over protobuf's 2 GiB)",
        )
    model = graph.model(config, opset)
    target.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(target))


def read_config(transformer_dir: Path) -> BertConfig:
    """The encoder's shape from ``config.json``, refusing what the graph does not reproduce."""
    path = transformer_dir / "config.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EmbeddingError(f"cannot read {path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise EmbeddingError(f"{path} is not a JSON object")
    model_type = raw.get("model_type")
    if model_type != "bert":
        raise _unsupported(transformer_dir, f"model_type {model_type!r} (only 'bert' is built)")
    positions = raw.get("position_embedding_type", "absolute")
    if positions != "absolute":
        raise _unsupported(transformer_dir, f"position_embedding_type {positions!r}")
    if raw.get("is_decoder", False):
        raise _unsupported(transformer_dir, "a decoder (is_decoder: true, causal attention)")
    values = {**_DEFAULTS, **{k: raw[k] for k in _DEFAULTS if raw.get(k) is not None}}
    act = values["hidden_act"]
    if act not in ACTIVATIONS:
        raise _unsupported(transformer_dir, f"hidden_act {act!r} (built: {', '.join(ACTIVATIONS)})")
    try:
        config = BertConfig(
            vocab_size=_positive_int(values, "vocab_size"),
            hidden_size=_positive_int(values, "hidden_size"),
            num_attention_heads=_positive_int(values, "num_attention_heads"),
            num_hidden_layers=_positive_int(values, "num_hidden_layers"),
            intermediate_size=_positive_int(values, "intermediate_size"),
            hidden_act=str(act),
            layer_norm_eps=float(values["layer_norm_eps"]),
            max_position_embeddings=_positive_int(values, "max_position_embeddings"),
            type_vocab_size=_positive_int(values, "type_vocab_size"),
        )
    except (TypeError, ValueError) as exc:
        raise EmbeddingError(f"{path}: {exc}") from exc
    if config.hidden_size % config.num_attention_heads:
        raise _unsupported(
            transformer_dir,
            f"hidden_size {config.hidden_size} not a multiple of "
            f"num_attention_heads {config.num_attention_heads}",
        )
    return config


def _positive_int(values: Mapping[str, object], key: str) -> int:
    value = values[key]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{key} must be a positive integer, got {value!r}")
    return value


def _unsupported(transformer_dir: Path, what: str) -> EmbeddingError:
    return EmbeddingError(
        f"the torch-free ONNX export cannot build {transformer_dir}: {what}; "
        "install the torch extra (pip install 'codechunkd[torch]') to export it with torch, "
        'or use backend "torch"'
    )


def _load_weights(transformer_dir: Path) -> dict[str, Array]:
    """Every tensor of the checkpoint, named as in a bare ``BertModel`` (prefix removed)."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    single = transformer_dir / "model.safetensors"
    index = transformer_dir / "model.safetensors.index.json"
    if single.is_file():
        files = [single]
    elif index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            files = sorted({transformer_dir / str(name) for name in weight_map.values()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise EmbeddingError(f"cannot read {index}: {exc}") from exc
    else:
        raise _unsupported(transformer_dir, "no model.safetensors (other formats need torch)")
    tensors: dict[str, Array] = {}
    for file in files:
        try:
            tensors.update(load_file(file))
        except (KeyError, TypeError) as exc:  # a dtype numpy lacks (safetensors' message)
            raise _unsupported(transformer_dir, f"{file.name}: {exc}") from exc
        except (OSError, ValueError, SafetensorError) as exc:
            raise EmbeddingError(f"cannot read {file}: {exc}") from exc
    for prefix in _PREFIXES:
        if f"{prefix}embeddings.word_embeddings.weight" in tensors:
            return {k.removeprefix(prefix): v for k, v in tensors.items() if k.startswith(prefix)}
    raise _unsupported(
        transformer_dir, "no embeddings.word_embeddings.weight (nor bert.…) among the weights"
    )


class _Graph:
    """Nodes and initializers of the graph being written, named after the HF modules."""

    def __init__(self, weights: Mapping[str, Array], source: Path) -> None:
        self._weights = weights
        self._source = source
        self._nodes: list[onnx.NodeProto] = []
        self._initializers: dict[str, onnx.TensorProto] = {}
        self.weight_bytes = 0

    def weight(self, name: str, shape: tuple[int, ...], *, transpose: bool = False) -> str:
        """A checkpoint tensor as a float32 initializer (transposed for ``x @ Wᵀ``)."""
        array = self._weights.get(name)
        if array is None and name.endswith("LayerNorm.weight"):  # TF-era checkpoints
            array = self._weights.get(name.removesuffix("weight") + "gamma")
        if array is None and name.endswith("LayerNorm.bias"):
            array = self._weights.get(name.removesuffix("bias") + "beta")
        if array is None:
            raise _unsupported(self._source, f"weight {name} is missing")
        if array.shape != shape:
            raise _unsupported(
                self._source,
                f"weight {name} has shape {list(array.shape)}, config.json implies {list(shape)}",
            )
        # float16/64, and bfloat16 (numpy knows it once onnx has imported ml_dtypes), widen
        # or round to float32 as HF's default float32 load does.
        if array.dtype.kind != "f" and array.dtype.name != "bfloat16":
            raise _unsupported(self._source, f"weight {name} has dtype {array.dtype}")
        if transpose:
            return self.constant(f"{name}.T", np.ascontiguousarray(array.T, dtype=np.float32))
        return self.constant(name, np.asarray(array, dtype=np.float32))

    def constant(self, name: str, array: Array) -> str:
        """An initializer, added once however often it is used."""
        if name not in self._initializers:
            self._initializers[name] = numpy_helper.from_array(array, name)
            self.weight_bytes += array.nbytes
        return name

    def scalar(self, value: float) -> str:
        return self.constant(f"const.{value!r}", np.array(value, dtype=np.float32))

    def ints(self, *values: int) -> str:
        return self.constant(f"const.{list(values)}", np.array(values, dtype=np.int64))

    def op(
        self,
        op_type: str,
        inputs: Sequence[str],
        name: str,
        *,
        output: str | None = None,
        **attributes: Attribute,
    ) -> str:
        """Append one node; its single output is named ``output`` or after the node."""
        out = output or name
        node = helper.make_node(op_type, list(inputs), [out], name=name)
        node.attribute.extend(helper.make_attribute(k, v) for k, v in attributes.items())
        self._nodes.append(node)
        return out

    def model(self, config: BertConfig, opset: int) -> onnx.ModelProto:
        dims: list[str | int] = ["batch", "sequence"]
        inputs = [
            helper.make_tensor_value_info(name, TensorProto.INT64, dims)
            for name in ("input_ids", "attention_mask", "token_type_ids")
        ]
        output = helper.make_tensor_value_info(
            "last_hidden_state", TensorProto.FLOAT, [*dims, config.hidden_size]
        )
        graph = helper.make_graph(
            self._nodes, "bert", inputs, [output], initializer=list(self._initializers.values())
        )
        opsets = [helper.make_opsetid("", opset)]
        # The lowest IR version the opset allows (8 for 17): onnx's newest may be newer
        # than the onnxruntime that loads the file accepts.
        return helper.make_model(
            graph,
            opset_imports=opsets,
            ir_version=helper.find_min_ir_version_for(opsets),
            producer_name="codechunkd",
        )


def _embeddings(g: _Graph, c: BertConfig) -> str:
    """Word + token type, then + position (HF's order of the float additions), normalised."""
    words = g.op(
        "Gather",
        [g.weight("embeddings.word_embeddings.weight", (c.vocab_size, c.hidden_size)), "input_ids"],
        "embeddings/word",
    )
    types = g.op(
        "Gather",
        [
            g.weight("embeddings.token_type_embeddings.weight", (c.type_vocab_size, c.hidden_size)),
            "token_type_ids",
        ],
        "embeddings/token_type",
    )
    # Positions 0..sequence-1 are the first rows of the table: a slice, not a gather.
    length = g.op("Shape", ["input_ids"], "embeddings/sequence_length", start=1, end=2)
    positions = g.op(
        "Slice",
        [
            g.weight(
                "embeddings.position_embeddings.weight", (c.max_position_embeddings, c.hidden_size)
            ),
            g.ints(0),
            length,
            g.ints(0),
        ],
        "embeddings/position",
    )
    summed = g.op("Add", [words, types], "embeddings/add_token_type")
    summed = g.op("Add", [summed, positions], "embeddings/add_position")
    return _layer_norm(g, summed, "embeddings.LayerNorm", c)


def _attention_bias(g: _Graph) -> str:
    """HF's extended mask, [batch, 1, 1, sequence]: 0 where attended, float32 min where padded.

    Computed once and added to every layer's scores.  The float32 minimum, not -inf,
    as HF: a padded key gets weight exactly 0 and no row's softmax can become NaN.
    """
    mask = g.op("Unsqueeze", ["attention_mask", g.ints(1, 2)], "mask/unsqueeze")
    mask = g.op("Cast", [mask], "mask/cast", to=TensorProto.FLOAT)
    inverted = g.op("Sub", [g.scalar(1.0), mask], "mask/invert")
    return g.op("Mul", [inverted, g.scalar(float(np.finfo(np.float32).min))], "mask/bias")


def _layer_norm(g: _Graph, x: str, module: str, c: BertConfig, output: str | None = None) -> str:
    return g.op(
        "LayerNormalization",
        [
            x,
            g.weight(f"{module}.weight", (c.hidden_size,)),
            g.weight(f"{module}.bias", (c.hidden_size,)),
        ],
        module.replace(".", "/"),
        output=output,
        axis=-1,
        epsilon=c.layer_norm_eps,
    )


def _linear(g: _Graph, x: str, module: str, inputs: int, outputs: int) -> str:
    """``nn.Linear``: ``x @ Wᵀ + b`` with Wᵀ stored, so no Transpose runs at inference."""
    name = module.replace(".", "/")
    product = g.op(
        "MatMul",
        [x, g.weight(f"{module}.weight", (outputs, inputs), transpose=True)],
        f"{name}/matmul",
    )
    return g.op("Add", [product, g.weight(f"{module}.bias", (outputs,))], f"{name}/bias")


def _self_attention(g: _Graph, x: str, bias: str, c: BertConfig, layer: int) -> str:
    """``BertAttention``: multi-head self-attention, output projection, residual, LayerNorm."""
    module = f"encoder.layer.{layer}.attention"
    name = module.replace(".", "/")
    heads = g.ints(0, 0, c.num_attention_heads, c.head_size)  # 0: keep batch and sequence

    def project(which: str, perm: Sequence[int]) -> str:
        y = _linear(g, x, f"{module}.self.{which}", c.hidden_size, c.hidden_size)
        y = g.op("Reshape", [y, heads], f"{name}/self/{which}/split_heads")
        return g.op("Transpose", [y], f"{name}/self/{which}/transpose", perm=perm)

    query = project("query", (0, 2, 1, 3))  # [batch, heads, sequence, head_size]
    key = project("key", (0, 2, 3, 1))  # [batch, heads, head_size, sequence]: Kᵀ
    value = project("value", (0, 2, 1, 3))
    scores = g.op("MatMul", [query, key], f"{name}/self/scores")
    # HF multiplies by head_size ** -0.5 (a float32 product), it does not divide by √d.
    scores = g.op("Mul", [scores, g.scalar(c.head_size**-0.5)], f"{name}/self/scale")
    scores = g.op("Add", [scores, bias], f"{name}/self/mask")
    weights = g.op("Softmax", [scores], f"{name}/self/softmax", axis=-1)
    context = g.op("MatMul", [weights, value], f"{name}/self/context")
    context = g.op("Transpose", [context], f"{name}/self/merge_heads", perm=(0, 2, 1, 3))
    context = g.op("Reshape", [context, g.ints(0, 0, c.hidden_size)], f"{name}/self/merge")
    out = _linear(g, context, f"{module}.output.dense", c.hidden_size, c.hidden_size)
    out = g.op("Add", [out, x], f"{name}/output/residual")
    return _layer_norm(g, out, f"{module}.output.LayerNorm", c)


def _feed_forward(
    g: _Graph, x: str, c: BertConfig, layer: int, *, output: str | None = None
) -> str:
    """``BertIntermediate`` + ``BertOutput``: up-projection, activation, down, residual, norm."""
    module = f"encoder.layer.{layer}"
    name = module.replace(".", "/")
    up = _linear(g, x, f"{module}.intermediate.dense", c.hidden_size, c.intermediate_size)
    act = _activation(g, up, c.hidden_act, f"{name}/intermediate/{c.hidden_act}")
    down = _linear(g, act, f"{module}.output.dense", c.intermediate_size, c.hidden_size)
    down = g.op("Add", [down, x], f"{name}/output/residual")
    return _layer_norm(g, down, f"{module}.output.LayerNorm", c, output)


def _activation(g: _Graph, x: str, kind: str, name: str) -> str:
    """HF's ACT2FN[kind], as the elementwise ops the torch export writes for it."""
    if kind == "relu":
        return g.op("Relu", [x], name)
    if kind == "gelu":  # x * 0.5 * (1 + erf(x / √2)), exact
        inner = g.op("Div", [x, g.scalar(math.sqrt(2.0))], f"{name}/div")
        inner = g.op("Erf", [inner], f"{name}/erf")
    else:  # gelu_new, gelu_pytorch_tanh: 0.5 * x * (1 + tanh(√(2/π) * (x + 0.044715 x³)))
        cube = g.op("Pow", [x, g.scalar(3.0)], f"{name}/cube")
        inner = g.op("Mul", [cube, g.scalar(0.044715)], f"{name}/cubic_term")
        inner = g.op("Add", [x, inner], f"{name}/polynomial")
        inner = g.op("Mul", [inner, g.scalar(math.sqrt(2.0 / math.pi))], f"{name}/scale")
        inner = g.op("Tanh", [inner], f"{name}/tanh")
    inner = g.op("Add", [inner, g.scalar(1.0)], f"{name}/add_one")
    product = g.op("Mul", [x, inner], f"{name}/mul")
    return g.op("Mul", [product, g.scalar(0.5)], f"{name}/half")
