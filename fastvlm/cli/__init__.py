"""The command line, `python -m fastvlm COMMAND`: `main` (the commands and the model flags app.py shares) and
`convert` (`convert` and `parity`, which span convert/, synth/ and verify/), and `slow_cpu` (what the app says at
start-up when a setting will be slow on this CPU).
"""
