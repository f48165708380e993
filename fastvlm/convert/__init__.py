"""FastVLM checkpoint -> the two files the engine runs (vision.onnx + llm.gguf), and the parity check.

Needs the convert extras (`pip install -r requirements-convert.txt`: torch, timm, transformers, ...);
nothing here is imported by the engine. One module per stage:

    checkpoint   read a FastVLM checkpoint (transformers format, or Apple's llava_qwen2 keys mapped)
    vocab        tokenizer.json <-> the GGUF vocabulary (`synth_tokenizer.Vocab`)
    vision_export  vision tower + projector -> ONNX, checked against torch
    text_gguf    Qwen2 text model -> GGUF, then llama.cpp quantization
    random_model random-weight FastVLMs (tiny, full-vision, 0.5b) saved as checkpoints
    convert      the whole conversion, ending with the parity check
    parity       transformers vs our engine on the same pixels and token ids
    cli          `python -m fastvlm convert` / `python -m fastvlm parity`
"""
