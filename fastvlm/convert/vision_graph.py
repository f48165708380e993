"""FastViTHD + projector as an ONNX graph, built from the checkpoint's tensors with numpy and `onnx` (no torch).

`pixel_values (1,3,H,W)` float32 in [0,1] -> `image_features (1,N,D)` float32, N = (H/64)*(W/64); H and W
stay dynamic (every squeeze-excite takes a global mean, every reshape keeps the batch and infers the
positions). The graph follows timm's `fastvit_mci3` in inference mode block by block (see `arch`):

    stem        3 x (re-parameterised conv -> GELU); strides 2, 2, 1
    stage       [patch embedding: large-kernel conv stride 2 -> GELU -> 1x1 conv -> GELU] [RepCPE dw conv]
                blocks: RepMixer  x = dwconv(x); x += g * mlp(x)   (layer scales g folded into the last conv)
                        attention x += g1 * attn(layernorm(x)); x += g2 * mlp(x)
                mlp = dw 7x7 conv (+ its BatchNorm, folded) -> 1x1 -> GELU -> 1x1
    final       conv 3x3 -> squeeze-excite (global mean, ReLU, sigmoid) -> GELU
    projector   flatten to (1,N,C) -> linear -> GELU -> linear
Weights stay float32 (bf16 checkpoint values widen exactly).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ._deps import require
from .arch import ATTENTION_HEAD_DIM, BATCH_NORM_EPS, LAYER_NORM_EPS, TOWER, StageArch, VisionArch, vision_arch
from .checkpoint import PROJECTOR, Checkpoint

log = logging.getLogger(__name__)

OPSET = 17
INPUT, OUTPUT = "pixel_values", "image_features"
EXTERNAL_DATA_BYTES = 2**31 - 2**26  # protobuf's 2 GiB limit, with room for the graph itself
STEM_STRIDES = (2, 2, 1)


class GraphBuilder:
    """Collects ONNX nodes and float32 initializers; every op returns the name of its output."""

    def __init__(self, weights) -> None:
        self.onnx = require("onnx")
        self.weights = weights  # name -> float32 array
        self.nodes, self.inits, self._n = [], [], 0

    def const(self, array, dtype=np.float32, name: str = "") -> str:
        self._n += 1
        name = f"{name or 'c'}#{self._n}"
        self.inits.append(self.onnx.numpy_helper.from_array(np.asarray(array, dtype=dtype, order="C"), name))
        return name

    def op(self, op: str, *inputs: str, **attrs) -> str:
        self._n += 1
        out = f"{op.lower()}#{self._n}"
        self.nodes.append(self.onnx.helper.make_node(op, list(inputs), [out], **attrs))
        return out

    def conv(self, x: str, name: str, c_in: int, stride: int = 1, weight=None, bias=None) -> str:
        """Conv2d with `name`.weight/.bias (or the given arrays); padding as timm's ((s-1) + (k-1)) // 2."""
        w = self.weights(name + ".weight") if weight is None else weight  # (C_out, C_in/groups, k, k)
        b = self.weights(name + ".bias") if bias is None else bias  # every conv here has one (FastViT, MCi alike)
        k = w.shape[-1]
        pad = ((stride - 1) + (k - 1)) // 2
        inputs = [x, self.const(w, name=name + ".weight"), self.const(b, name=name + ".bias")]
        return self.op("Conv", *inputs, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4,
                       group=c_in // w.shape[1])

    def gelu(self, x: str) -> str:
        """Exact GELU x/2 (1 + erf(x / sqrt 2)) in opset-17 ops, in the form ONNX Runtime fuses into one kernel.

        The `Div` by sqrt 2 matters: ONNX Runtime's GELU fusion does not match a `Mul` by 1/sqrt 2, and the
        five unfused element-wise ops (plus the layout reorders around them) made the whole encoder 15-20 %
        slower (docs/convert.md, "Vision graph speed")."""
        e = self.op("Erf", self.op("Div", x, self.const(np.sqrt(2))))
        return self.op("Mul", self.op("Mul", x, self.op("Add", e, self.const(1.0))), self.const(0.5))

    def linear(self, x: str, name: str, scale=None, bias: bool = True) -> str:
        """(x @ W^T + b) * scale for (..., C_in) -> (..., C_out); a per-channel `scale` is folded into W and b.
        `bias=False`: a layer built without one (a bias in the checkpoint is then left unused: an error)."""
        w = self.weights(name + ".weight")  # (C_out, C_in)
        b = self.weights(name + ".bias") if bias else None
        if scale is not None:
            w, b = w * scale[:, None], (b * scale if b is not None else None)
        y = self.op("MatMul", x, self.const(w.T, name=name + ".weight"))
        return self.op("Add", y, self.const(b, name=name + ".bias")) if b is not None else y

    def to_tokens(self, x: str, c: int) -> str:
        """(1, C, H, W) -> (1, H*W, C)."""
        flat = self.op("Reshape", x, self.const([0, c, -1], np.int64))
        return self.op("Transpose", flat, perm=[0, 2, 1])


class _Weights:
    """Tower/projector tensors by their short names, float32."""

    def __init__(self, ckpt: Checkpoint) -> None:
        self.ckpt = ckpt

    def _full(self, name: str) -> str:
        return name if name.startswith(PROJECTOR) else TOWER + name

    def __call__(self, name: str):
        """The tensor; a `CheckpointError` naming it when the checkpoint lacks it."""
        return self.ckpt.array(self._full(name))

    def has(self, name: str) -> bool:
        return self._full(name) in self.ckpt.index

    def shape(self, name: str) -> tuple[int, ...]:
        """From the checkpoint's header: no tensor is read."""
        return tuple(self.ckpt.index[self._full(name)].shape)


def _squeeze_excite(g: GraphBuilder, x: str, name: str, c: int) -> str:
    s = g.op("ReduceMean", x, axes=[2, 3], keepdims=1)  # (1, C, 1, 1): a global mean, so H/W stay free
    s = g.op("Relu", g.conv(s, name + ".fc1", c))
    s = g.op("Sigmoid", g.conv(s, name + ".fc2", g.weights.shape(name + ".fc1.weight")[0]))
    return g.op("Mul", x, s)


def _mobileone(g: GraphBuilder, x: str, name: str, c_in: int, stride: int = 1, act: bool = True) -> str:
    """A re-parameterised MobileOne / large-kernel conv: conv [-> SE] [-> GELU]."""
    y = g.conv(x, name + ".reparam_conv", c_in, stride)
    if g.weights.has(name + ".se.fc1.weight"):
        y = _squeeze_excite(g, y, name + ".se", g.weights.shape(name + ".reparam_conv.weight")[0])
    return g.gelu(y) if act else y


def fold_batch_norm(w, bn_w, bn_b, mean, var, eps: float = BATCH_NORM_EPS) -> tuple[np.ndarray, np.ndarray]:
    """A conv without bias (weight `w`, (C, ...)) then eval-mode BatchNorm, as one conv's (weight, bias)."""
    scale = bn_w / np.sqrt(var + eps)
    return w * scale.reshape(-1, *[1] * (w.ndim - 1)), bn_b - mean * scale


def _mlp(g: GraphBuilder, x: str, name: str, c: int, gamma) -> str:
    """gamma * ConvMlp(x); the layer scale `gamma` (C,) is folded into fc2."""
    w = g.weights(name + ".conv.conv.weight")  # (C, 1, 7, 7), no bias: BatchNorm follows (folded here)
    bn_w, bn_b = g.weights(name + ".conv.bn.weight"), g.weights(name + ".conv.bn.bias")
    mean, var = g.weights(name + ".conv.bn.running_mean"), g.weights(name + ".conv.bn.running_var")
    w, b = fold_batch_norm(w, bn_w, bn_b, mean, var)
    y = g.conv(x, name + ".conv", c, weight=w, bias=b)
    y = g.gelu(g.conv(y, name + ".fc1", c))  # (1, 4C, H, W)
    w2, b2 = g.weights(name + ".fc2.weight"), g.weights(name + ".fc2.bias")
    return g.conv(y, name + ".fc2", w2.shape[1], weight=w2 * gamma[:, None, None, None], bias=b2 * gamma)


def _gamma(g: GraphBuilder, name: str) -> np.ndarray:
    return g.weights(name).reshape(-1)  # layer scale (C, 1, 1) -> (C,)


def _attention(g: GraphBuilder, x: str, name: str, c: int, gamma) -> str:
    """gamma * multi-head self-attention over the H*W positions of LayerNorm2d(x); returns (1, C, H, W)."""
    heads = c // ATTENTION_HEAD_DIM
    t = g.to_tokens(x, c)  # (1, N, C)
    t = g.op("LayerNormalization", t, g.const(g.weights(name + ".norm.weight")),
             g.const(g.weights(name + ".norm.bias")),
             axis=-1, epsilon=LAYER_NORM_EPS)
    qkv = g.linear(t, name + ".token_mixer.qkv", bias=False)  # (1, N, 3C); qkv_bias=False in FastViT and MCi
    qkv = g.op("Reshape", qkv, g.const([0, -1, 3, heads, ATTENTION_HEAD_DIM], np.int64))
    qkv = g.op("Transpose", qkv, perm=[2, 0, 3, 1, 4])  # (3, 1, h, N, 32)
    q, k, v = (g.op("Gather", qkv, g.const(i, np.int64), axis=0) for i in range(3))  # (1, h, N, 32)
    q = g.op("Mul", q, g.const(ATTENTION_HEAD_DIM ** -0.5))
    att = g.op("Softmax", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2])), axis=-1)  # (1, h, N, N)
    y = g.op("Transpose", g.op("MatMul", att, v), perm=[0, 2, 1, 3])  # (1, N, h, 32)
    y = g.linear(g.op("Reshape", y, g.const([0, 0, c], np.int64)), name + ".token_mixer.proj", gamma)  # (1, N, C)
    y = g.op("Transpose", y, perm=[0, 2, 1])  # (1, C, N)
    return g.op("Reshape", y, g.op("Shape", x))  # (1, C, H, W)


def _stage(g: GraphBuilder, x: str, s: StageArch, c_in: int) -> str:
    p = f"stages.{s.index}."
    if s.downsample:
        x = _mobileone(g, x, p + "downsample.proj.0", c_in, stride=2)
        x = _mobileone(g, x, p + "downsample.proj.1", s.width)
    if s.pos_emb:
        x = g.conv(x, p + "pos_emb.reparam_conv", s.width)
    for b in range(s.blocks):
        name = f"{p}blocks.{b}"
        if s.attention:
            x = g.op("Add", x, _attention(g, x, name, s.width, _gamma(g, name + ".layer_scale_1.gamma")))
            x = g.op("Add", x, _mlp(g, x, name + ".mlp", s.width, _gamma(g, name + ".layer_scale_2.gamma")))
        else:
            x = g.conv(x, name + ".token_mixer.reparam_conv", s.width)
            x = g.op("Add", x, _mlp(g, x, name + ".mlp", s.width, _gamma(g, name + ".layer_scale.gamma")))
    return x


def build_vision_graph(ckpt: Checkpoint, arch: VisionArch | None = None):
    """The `onnx.ModelProto` of the vision tower + projector of `ckpt`."""
    onnx = require("onnx")
    arch = arch or vision_arch(ckpt)
    g = GraphBuilder(_Weights(ckpt))
    x, c = INPUT, 3
    for i, stride in enumerate(STEM_STRIDES):
        x = _mobileone(g, x, f"stem.{i}", c, stride)  # (1, C0, H/4, W/4) at the end
        c = arch.stem_width
    for s in arch.stages:
        x = _stage(g, x, s, c)
        c = s.width
    x = _mobileone(g, x, "final_conv", c)  # (1, 2C, H/64, W/64)
    t = g.to_tokens(x, arch.final_width)  # (1, N, 2C)
    t = g.gelu(g.linear(t, PROJECTOR + "linear_1"))
    g.nodes.append(onnx.helper.make_node("Identity", [g.linear(t, PROJECTOR + "linear_2")], [OUTPUT]))  # (1, N, D)
    f32 = onnx.TensorProto.FLOAT
    graph = onnx.helper.make_graph(
        g.nodes, "fastvlm-vision",
        [onnx.helper.make_tensor_value_info(INPUT, f32, [1, 3, "height", "width"])],
        [onnx.helper.make_tensor_value_info(OUTPUT, f32, [1, "num_tokens", arch.embed_dim])],
        g.inits)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", OPSET)],
                                   producer_name="fastvlm.convert.vision_graph")
    model.ir_version = 8  # opset 17 needs IR >= 8; older ONNX Runtimes refuse newer IR versions
    return model


def write_vision_onnx(ckpt: Checkpoint, path: Path, arch: VisionArch | None = None) -> Path:
    """Build and save `vision.onnx` (with a `.data` file beside it when over 2 GiB)."""
    onnx = require("onnx")
    model = build_vision_graph(ckpt, arch)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if model.ByteSize() > EXTERNAL_DATA_BYTES:
        onnx.save(model, str(path), save_as_external_data=True, location=path.name + ".data")
    else:
        onnx.save(model, str(path))
    onnx.checker.check_model(str(path))
    return path
