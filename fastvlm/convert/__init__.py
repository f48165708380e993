"""FastVLM checkpoint -> the two files the engine runs (vision.onnx + llm.gguf), owning the GGUF's metadata and types.

The conversion (`build.convert_checkpoint`) needs only what requirements.txt installs: numpy, onnx, gguf,
llama-cpp-python; never torch. Nothing here is imported by the engine, and nothing here imports
`fastvlm.synth` (the random models) or `fastvlm.verify` (parity, doctor). One module per stage:

    safetensors_np  read (and write) safetensors with numpy, bf16 included
    checkpoint      a FastVLM checkpoint folder (transformers format, or Apple's llava_qwen2 keys mapped)
    arch            the architecture, from tensor shapes and config.json
    vision_graph    FastViTHD + projector -> ONNX, built from the tensors
    vocab           the tokenizer files (tokenizer.json, or the slow-tokenizer files) <-> the GGUF vocabulary
    qwen2_gguf      what a qwen2 GGUF records besides tensors: sizes, ChatML template, vocabulary, special ids
    text_gguf       Qwen2 text model -> GGUF (F32/F16/BF16), then llama.cpp quantization (`quantize`)
    build           the whole conversion: convert_checkpoint(checkpoint_dir, out_dir, quant, ...)
    int8            calibrated int8 vision encoders (and the two sample images they calibrate on)
"""
