"""FastVLM checkpoint -> the two files the engine runs (vision.onnx + llm.gguf), and the parity check.

The conversion (`build.convert_checkpoint`) needs only what requirements.txt installs: numpy, onnx, gguf,
llama-cpp-python; never torch. The parity check and the random-weight checkpoints use torch, timm and
transformers as the reference (`pip install -r requirements-convert.txt`). Nothing here is imported by the
engine. One module per stage:

    safetensors_np  read (and write) safetensors with numpy, bf16 included
    checkpoint      a FastVLM checkpoint folder (transformers format, or Apple's llava_qwen2 keys mapped)
    arch            the architecture, from tensor shapes and config.json
    vision_graph    FastViTHD + projector -> ONNX, built from the tensors
    vocab           the tokenizer files (tokenizer.json, or the slow-tokenizer files) <-> the GGUF vocabulary
    text_gguf       Qwen2 text model -> GGUF (F32/F16/BF16), then llama.cpp quantization
    build           the whole conversion: convert_checkpoint(checkpoint_dir, out_dir, quant, ...)
    random_model    random-weight FastVLMs saved as checkpoints (transformers or Apple's layout; torch)
    parity, compare transformers vs our engine on the same pixels and token ids (torch)
    int8            calibrated int8 vision encoders
    cli             `python -m fastvlm convert` / `python -m fastvlm parity`
"""
