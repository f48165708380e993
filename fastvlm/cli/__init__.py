"""The command line, `python -m fastvlm COMMAND`: `main` (the commands and the model flags app.py shares) and
`convert` (`convert` and `parity`, which span convert/, synth/ and verify/).
"""
