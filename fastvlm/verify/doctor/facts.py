"""Facts the doctor reads without running a model: the machine, the runtimes, and each model file.

Cheap and side-effect free: the GGUF header through `gguf.GGUFReader` (memory-mapped), the vision graph's
inputs and outputs through `onnx` without its weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...bench.stats import PACKAGES, machine_info
from ...engine.cpu import narrow_vectors, native_bf16
from ...engine.describe import is_synthetic
from ...engine.events import ModelFileError
from ...engine.vision import GraphSpec, read_spec
from .report import Section

DOCTOR_PACKAGES = PACKAGES + ("gradio", "gguf", "onnx", "huggingface-hub")
REQUIRED = {"llama-cpp-python": "the language model", "onnxruntime": "the vision encoder", "numpy": "everything"}
ONNX_TYPES = {1: "tensor(float)", 10: "tensor(float16)"}  # onnx.TensorProto FLOAT / FLOAT16
# On a CPU with AVX2 but no AVX-512 (`cpu.narrow_vectors`): what it costs, and the ways to a quicker first answer
NARROW_DETAIL = ("AVX2 without AVX-512: the vision encoder runs in f32 on 256-bit vectors, several times slower than "
                 "on an AVX-512 BF16 CPU (a 2-core AMD EPYC without AVX-512: 0.84 s at 512 px, 3.4 s at 1024, "
                 "docs/performance.md)")
NARROW_FIX = ("answer at 512 px (--resolution 512); int8 vision (convert --int8, then --vision int8) took 0.65x / "
              "0.56x the f32 time there: check its answers with doctor --int8-vision; for hands-free voice, fewer "
              "conversation turns (--voice-turns 1 or 0: a turn is ~1 s of prefill, which a question asked over an "
              "answer waits for)")


def machine_section(threads: int) -> tuple[Section, dict]:
    info = machine_info(threads, DOCTOR_PACKAGES)
    s = Section("Machine")
    s.add("info", "CPU", info["cpu"])
    s.add("info", "features", ", ".join(info["cpu_features"]) or "none of AVX2 / AVX-512 / VNNI / BF16 / AMX")
    if "AVX2" not in info["cpu_features"]:
        s.add("warn", "AVX2", "missing: llama.cpp and ONNX Runtime run several times slower",
              "use an x86-64 machine with AVX2 (any CPU since about 2015)")
    s.add("info", "bf16", "native (AVX-512 BF16 or AMX): bf16 is fast and exact to bf16 weights" if native_bf16()
          else "emulated: the exact f32 / Q8_0 choices are kept")
    if narrow_vectors():
        s.add("warn", "speed", NARROW_DETAIL, NARROW_FIX)  # a warning, so that its fix line is shown; it fails nothing
    s.add("info", "cores", f"{info['physical_cores']} physical, {info['logical_cores']} logical; "
          f"{threads} threads used")
    s.add("info", "memory", f"{info['memory_gib']} GiB; Python {info['python']} on {info['platform']}")
    versions = info["versions"]
    s.add("info", "versions", ", ".join(f"{k} {v}" for k, v in versions.items()))
    for pkg, role in REQUIRED.items():
        if pkg not in versions:
            s.add("fail", pkg, f"not installed; it runs {role}", "pip install -r requirements.txt")
    return s, info


@dataclass(frozen=True)
class GgufFacts:
    path: Path
    name: str  # general.name
    architecture: str
    file_type: str  # F32, F16, BF16, Q8_0, Q4_K_M ...
    vocab_size: int
    eos_id: int | None
    eos_token: str
    width: int | None  # <arch>.embedding_length: what the image embeddings must match
    context_length: int | None


def _field(reader, key: str):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def read_gguf(path: Path) -> GgufFacts:
    from gguf import GGUFReader, LlamaFileType

    try:
        reader = GGUFReader(str(path))
    except Exception as e:  # gguf raises ValueError/struct errors for what is not a GGUF
        raise ModelFileError(f"{path} is not a readable GGUF ({e}); re-download or re-convert it") from e
    arch = _field(reader, "general.architecture") or "?"
    ftype = _field(reader, "general.file_type")
    try:
        ftype = LlamaFileType(ftype).name.removeprefix("MOSTLY_").removeprefix("ALL_")
    except ValueError:
        ftype = f"type {ftype}" if ftype is not None else "not stated"
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    vocab = len(tokens.data) if tokens is not None else 0
    eos = _field(reader, "tokenizer.ggml.eos_token_id")
    eos_token = str(tokens.contents(eos)) if tokens is not None and eos is not None and eos < vocab else "?"
    return GgufFacts(Path(path), _field(reader, "general.name") or Path(path).stem, arch, ftype, vocab, eos, eos_token,
                     _field(reader, f"{arch}.embedding_length"), _field(reader, f"{arch}.context_length"))


def graph_io(path: Path) -> tuple[list, list]:
    """The vision graph's (name, shape, type) inputs and outputs, read without its weights."""
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # onnx raises DecodeError and others for what is not a graph
        raise ModelFileError(f"{path} is not a readable ONNX graph ({e}); re-download or re-convert it") from e

    def io(values):
        return [(v.name, [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                          for d in v.type.tensor_type.shape.dim],
                 ONNX_TYPES.get(v.type.tensor_type.elem_type, f"elem_type {v.type.tensor_type.elem_type}"))
                for v in values]

    _check_external_data(model, Path(path))
    inits = {i.name for i in model.graph.initializer}
    return io([i for i in model.graph.input if i.name not in inits]), io(model.graph.output)


def _check_external_data(model, path: Path) -> None:
    """Every file the graph keeps its weights in (external data, named relative to the graph) must be there."""
    from onnx.external_data_helper import ExternalDataInfo, uses_external_data

    places = {ExternalDataInfo(t).location for t in model.graph.initializer if uses_external_data(t)}
    missing = sorted(p for p in places if not (path.parent / p).is_file())
    if missing:
        raise ModelFileError(f"{path} keeps its weights in {', '.join(missing)}, missing beside it in {path.parent}; "
                             "copy it there with the graph, or re-download or re-convert both")


def _mib(path: Path) -> str:
    return f"{path.stat().st_size / 2**20:,.1f} MiB"


def _shapes(values) -> str:
    return "; ".join(f"{n} {tuple(s)} {t.removeprefix('tensor(').rstrip(')')}" for n, s, t in values)


def llm_section(path: Path, source: str) -> tuple[Section, GgufFacts | None]:
    s = Section(f"Language model: {path.name}")
    s.add("info", "path", str(path))
    s.add("info", "from", source)
    try:
        g = read_gguf(path)
    except ModelFileError as e:
        s.add("fail", "GGUF", str(e), "download it again (python -m fastvlm download) or pass --llm PATH")
        return s, None
    s.add("info", "size", _mib(path))
    s.add("info", "model", f"{g.name} ({g.architecture}), {g.file_type}, width {g.width}, context {g.context_length}")
    s.add("info", "vocabulary", f"{g.vocab_size} tokens, eos {g.eos_id} {g.eos_token!r}")
    if g.architecture != "qwen2":
        s.add("warn", "architecture", f"{g.architecture}; FastVLM's language model is qwen2",
              "use the GGUF that belongs to the vision encoder")
    if g.eos_token not in ("<|im_end|>", "<|endoftext|>"):
        s.add("warn", "eos", f"{g.eos_token!r}; generation stops at <|im_end|> "
              "(looked up by text, so answers still end)")
    if is_synthetic(g.name):
        s.add("skip", "weights", "synthetic (random weights): answers are gibberish; the known-answer checks skip")
    return s, g


def vision_section(path: Path, source: str, llm: GgufFacts | None) -> tuple[Section, GraphSpec | None]:
    s = Section(f"Vision encoder: {path.name}")
    s.add("info", "path", str(path))
    s.add("info", "from", source)
    try:
        inputs, outputs = graph_io(path)
        s.add("info", "size", _mib(path))
        s.add("info", "inputs", _shapes(inputs))
        s.add("info", "outputs", _shapes(outputs))
        spec = read_spec(path, inputs, outputs)
    except ModelFileError as e:
        s.add("fail", "graph", str(e), "download it again (python -m fastvlm download) or pass --vision PATH")
        return s, None
    s.add("info", "sizes", ("fixed: " if spec.fixed_size else "dynamic: ") + spec.sizes)
    width = llm.width if llm is not None else None
    if spec.embed_dim is None or width is None:
        s.add("info", "width", f"{spec.embed_dim or 'dynamic'} (checked on the first image)")
    elif spec.embed_dim != width:
        s.add("fail", "width", f"vision gives {spec.embed_dim}-wide embeddings, {llm.path.name} expects {width}",
              "the two files belong to different FastVLM models: take both from one source (--source, --models DIR)")
    else:
        s.add("ok", "width", f"{spec.embed_dim} = the language model's")
    return s, spec
