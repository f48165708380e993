"""`python -m fastvlm bench --journeys --browser`: the journeys of `fastvlm.bench.journeys` walked through the
real page by headless Chromium on this machine (the laptop case: the browser shares the CPU with the engine).

  media   upload files, the fake webcam clip, the fake microphone's spoken questions
  serve   the app around a recording engine, in this process; Chromium through Playwright
  page    the page-side recorder (the page's own clock) and small page helpers
  walks   one function per journey
  echo    the answers' own voice looped into the microphone (`--echo N`), through a modelled room if asked
          (`bench.acoustics`, `--echo-room`)
  run     all of them in order, the report (the engine-only report's shape, plus "driver": "browser")
"""
