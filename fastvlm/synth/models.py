"""Random-weight models the project builds itself: a vision ONNX and a Qwen2 GGUF.

They follow the real FastVLM contract (pixel_values (1,3,H,W) -> image_features
(1,(H/64)*(W/64),D); a `qwen2` GGUF with hidden size D and a ChatML byte-level
BPE tokenizer), so the whole engine runs on them without downloading anything.
`tiny` builds in well under a second for tests; `0.5b` has Qwen2-0.5B's real
shapes (quantized to Q4_K_M) for timing the engine.

    python -m fastvlm synth --out DIR [--shape tiny|0.5b] [--seed N]
"""

from __future__ import annotations

import argparse
import importlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fastvlm.convert.quantize import quantize_gguf
from fastvlm.convert.qwen2_gguf import CHAT_TEMPLATE, Qwen2Sizes, Vocab, add_qwen2_metadata
from fastvlm.engine.config import PATCH
from fastvlm.synth.tokenizer import build_vocab

log = logging.getLogger(__name__)

OPSET = 17
STEM = 64  # channels of the stride-4 stem when a shape has extra 3x3 convs


@dataclass(frozen=True)
class SynthPaths:
    vision: Path
    llm: Path


@dataclass(frozen=True)
class Shape:
    """Sizes of one synthetic model pair."""

    layers: int
    hidden: int  # D: LM embedding size = vision output size
    heads: int
    kv_heads: int
    intermediate: int
    context: int  # metadata only; the engine picks its own n_ctx
    vocab_size: int | None  # None: just the learned tokens and the specials
    init_std: float  # std of random matrices and embeddings; norms are 1
    vision_channels: int  # C: channels of the 64x64 patch conv
    vision_convs: int  # extra 3x3 convs (0: a single patch conv)
    f16: bool  # write weight matrices in F16 instead of F32
    quantize: bool  # quantize to Q4_K_M with llama.cpp afterwards


SHAPES = {
    # tiny's std is 0.2: at 0.02 its tied embeddings make it repeat the last token whatever the image
    "tiny": Shape(2, 64, 4, 2, 128, 4096, None, 0.2, 32, 0, f16=False, quantize=False),
    "0.5b": Shape(24, 896, 14, 2, 4864, 32768, 151936, 0.02, 256, 3, f16=True, quantize=True),
}
ROPE_THETA = 1e6
RMS_EPS = 1e-6


def write_models(out_dir: Path, shape: str = "tiny", seed: int = 0) -> SynthPaths:
    """Write `out_dir/vision.onnx` and `out_dir/llm.gguf`; the same seed gives the same bytes."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; choose one of {', '.join(SHAPES)}")
    s = SHAPES[shape]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = SynthPaths(out_dir / "vision.onnx", out_dir / "llm.gguf")
    t0 = time.perf_counter()
    write_vision(paths.vision, s, np.random.default_rng([seed, 1]))
    t1 = time.perf_counter()
    vocab = build_vocab(vocab_size=s.vocab_size)
    if s.quantize:
        tmp = paths.llm.with_name(paths.llm.name + ".f16.tmp")
        try:
            write_llm(tmp, s, vocab, np.random.default_rng([seed, 0]), name=f"fastvlm-synth-{shape}")
            quantize_gguf(tmp, paths.llm)
        finally:
            tmp.unlink(missing_ok=True)
    else:
        write_llm(paths.llm, s, vocab, np.random.default_rng([seed, 0]), name=f"fastvlm-synth-{shape}")
    t2 = time.perf_counter()
    log.info("synth %s seed %d: vision %.2fs, llm %.2fs (%d tokens)", shape, seed, t1 - t0, t2 - t1, len(vocab.tokens))
    return paths


# ---- language model ----------------------------------------------------------


def _require(module: str, requirement: str):
    """Import a build-time dependency (see requirements-dev.txt), or say how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"building synthetic models needs {module}: pip install '{requirement}'") from e


def _gguf():
    return _require("gguf", "gguf==0.19.0")


def _matrix(rng: np.random.Generator, rows: int, cols: int, s: Shape) -> np.ndarray:
    w = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(s.init_std)  # (out, in)
    return w.astype(np.float16) if s.f16 else w


def _llm_tensors(s: Shape, n_vocab: int, rng: np.random.Generator):
    """(name, array) in file order; numpy shapes are (out, in), GGUF stores them reversed."""
    gguf = _gguf()
    names = gguf.TENSOR_NAMES
    T = gguf.MODEL_TENSOR
    head_dim = s.hidden // s.heads
    kv = s.kv_heads * head_dim
    ones = np.ones(s.hidden, dtype=np.float32)
    yield names[T.TOKEN_EMBD] + ".weight", _matrix(rng, n_vocab, s.hidden, s)  # (V, D); tied: also the output head
    for i in range(s.layers):
        def n(t, i=i):
            return names[t].format(bid=i)

        yield n(T.ATTN_NORM) + ".weight", ones
        for t, rows in ((T.ATTN_Q, s.hidden), (T.ATTN_K, kv), (T.ATTN_V, kv)):
            yield n(t) + ".weight", _matrix(rng, rows, s.hidden, s)
            yield n(t) + ".bias", rng.standard_normal(rows, dtype=np.float32) * np.float32(s.init_std)
        yield n(T.ATTN_OUT) + ".weight", _matrix(rng, s.hidden, s.hidden, s)
        yield n(T.FFN_NORM) + ".weight", ones
        yield n(T.FFN_GATE) + ".weight", _matrix(rng, s.intermediate, s.hidden, s)
        yield n(T.FFN_UP) + ".weight", _matrix(rng, s.intermediate, s.hidden, s)
        yield n(T.FFN_DOWN) + ".weight", _matrix(rng, s.hidden, s.intermediate, s)
    yield names[T.OUTPUT_NORM] + ".weight", ones


def write_llm(path: Path, s: Shape, vocab: Vocab, rng: np.random.Generator, name: str) -> None:
    """A `qwen2` GGUF with tied embeddings (llama.cpp reuses token_embd as the output head)."""
    gguf = _gguf()
    w = gguf.GGUFWriter(path, "qwen2")
    sizes = Qwen2Sizes(s.context, s.hidden, s.layers, s.intermediate, s.heads, s.kv_heads, ROPE_THETA, RMS_EPS)
    add_qwen2_metadata(w, gguf, name, sizes, s.f16, vocab, CHAT_TEMPLATE)
    for tensor_name, array in _llm_tensors(s, len(vocab.tokens), rng):
        w.add_tensor(tensor_name, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ---- vision encoder ----------------------------------------------------------


def write_vision(path: Path, s: Shape, rng: np.random.Generator) -> None:
    onnx = _require("onnx", "onnx>=1.16")
    model = build_vision(s, rng)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


class _Graph:
    """Collects ONNX nodes and float32 initializers drawn from one seeded generator."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.onnx = _require("onnx", "onnx>=1.16")
        self.rng, self.nodes, self.inits = rng, [], []

    def const(self, name: str, array, dtype=np.float32) -> str:
        self.inits.append(self.onnx.numpy_helper.from_array(np.ascontiguousarray(array, dtype=dtype), name))
        return name

    def normal(self, name: str, shape: tuple[int, ...], std: float) -> str:
        return self.const(name, self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std))

    def node(self, op: str, inputs: list[str], output: str, **attrs) -> str:
        self.nodes.append(self.onnx.helper.make_node(op, inputs, [output], **attrs))
        return output

    def conv_relu(self, x: str, name: str, c_in: int, c_out: int, k: int, stride: int, pad: int = 0) -> str:
        w = self.normal(f"{name}.w", (c_out, c_in, k, k), np.sqrt(2.0 / (c_in * k * k)))  # He init
        b = self.normal(f"{name}.b", (c_out,), 0.1)  # nonzero, so even a flat gray image gives features
        y = self.node("Conv", [x, w, b], f"{name}.conv", kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
        return self.node("Relu", [y], name)

    def gelu(self, x: str, name: str) -> str:
        """Exact GELU, x * 0.5 * (1 + erf(x / sqrt 2)), from opset-17 ops (Gelu itself is opset 20)."""
        e = self.node("Erf", [self.node("Mul", [x, self.const(f"{name}.k", 1 / np.sqrt(2))], f"{name}.s")], f"{name}.e")
        p = self.node("Add", [e, self.const(f"{name}.one", 1.0)], f"{name}.p")
        return self.node("Mul", [self.node("Mul", [x, p], f"{name}.xp"), self.const(f"{name}.half", 0.5)], name)


def build_vision(s: Shape, rng: np.random.Generator):
    """pixel_values (1,3,H,W) in [0,1] -> image_features (1,(H/64)*(W/64),D), D = s.hidden.

    Convs down to one vector per 64x64 patch, a LayerNorm, then a two-layer GELU
    projector whose output has the token embeddings' scale (std = init_std).
    """
    g = _Graph(rng)
    x = g.node("Sub", ["pixel_values", g.const("center", 0.5)], "centered")
    c, d = s.vision_channels, s.hidden
    if s.vision_convs:  # a stride-4 stem, 3x3 convs there, then a 16x16 patch conv: stride 64 in all
        x = g.conv_relu(x, "stem", 3, STEM, 4, 4)  # (1, 64, H/4, W/4)
        for i in range(s.vision_convs):
            x = g.conv_relu(x, f"block{i}", STEM, STEM, 3, 1, pad=1)  # (1, 64, H/4, W/4)
        x = g.conv_relu(x, "patch", STEM, c, PATCH // 4, PATCH // 4)  # (1, C, H/64, W/64)
    else:
        x = g.conv_relu(x, "patch", 3, c, PATCH, PATCH)  # (1, C, H/64, W/64)
    x = g.node("Reshape", [x, g.const("flat_shape", [1, c, -1], np.int64)], "flat")  # (1, C, N)
    x = g.node("Transpose", [x], "tokens", perm=[0, 2, 1])  # (1, N, C)
    x = g.node("LayerNormalization", [x, g.const("ln.g", np.ones(c)), g.const("ln.b", np.zeros(c))], "normed", axis=-1)
    x = g.node("MatMul", [x, g.normal("proj1.w", (c, d), 1 / np.sqrt(c))], "proj1")  # (1, N, D), entries ~ N(0, 1)
    x = g.gelu(g.node("Add", [x, g.normal("proj1.b", (d,), 0.1)], "proj1.biased"), "gelu")
    gelu_rms = 0.65  # sqrt(E[gelu(z)^2]) for z ~ N(0, 1)
    x = g.node("MatMul", [x, g.normal("proj2.w", (d, d), s.init_std / gelu_rms / np.sqrt(d))], "proj2")
    g.node("Add", [x, g.const("proj2.b", np.zeros(d))], "image_features")  # (1, N, D)
    helper, f32 = g.onnx.helper, g.onnx.TensorProto.FLOAT
    graph = helper.make_graph(
        g.nodes,
        "fastvlm-synth-vision",
        [helper.make_tensor_value_info("pixel_values", f32, [1, 3, "height", "width"])],
        [helper.make_tensor_value_info("image_features", f32, [1, "num_tokens", d])],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="fastvlm.synth")
    model.ir_version = 8  # opset 17 needs IR >= 8; older onnxruntimes refuse newer IR versions
    return model


# ---- command line ------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="folder for vision.onnx and llm.gguf")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny",
                        help="tiny: for tests; 0.5b: Qwen2-0.5B sizes")
    parser.add_argument("--seed", type=int, default=0, help="the same seed writes the same bytes")


def run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    paths = write_models(args.out, args.shape, args.seed)
    mib = [p.stat().st_size / 2**20 for p in (paths.vision, paths.llm)]
    print(f"wrote {paths.vision} ({mib[0]:.1f} MiB) and {paths.llm} ({mib[1]:.1f} MiB) "
          f"in {time.perf_counter() - t0:.1f}s")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fastvlm synth", description=__doc__.splitlines()[0])
    add_arguments(parser)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
