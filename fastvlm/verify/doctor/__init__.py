"""`python -m fastvlm doctor`: is this install right? Machine and file facts, then checks on the models.

- `facts`: the CPU, runtimes and each model file (source, size, graph contract, GGUF type and vocabulary);
- `images`: the test images, drawn here with PIL (a red disc, big digits);
- `checks`: known answers, runtime cross-check, int8 vision gate, quantization cost, over an engine;
- `report`: the lines (✓ ✗ ! –) in sections, the text and JSON forms, the exit code;
- `cli`: the flags and the order of the work.
"""
