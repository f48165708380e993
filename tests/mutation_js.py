"""Can the voice tests fail? The page's JavaScript (ui/voice/link.js, the scripts in ui/voice/page.py) changed one
meaning at a time, by hand-written text edits (`tests.mutation` reads only Python), each run against the tests.

    python -m tests.mutation_js [TESTS...]       (default: the voice tests, ~25 min on 2 cores)

Each mutant is written into one copy of the project's files in a temporary folder (never into the working tree),
after the tests passed there unmutated; a mutant the tests all pass is a survivor. docs/testing.md (stop 57) says
what survived and why.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from tests.mutation import copy_project, passes, pytest_command, time_limit

LINK, PAGE = "ui/voice/link.js", "ui/voice/page.py"
TESTS = ["tests/browser/test_voice_line_page.py", "tests/unit/ui/test_ui_voice_link.py",
         "tests/unit/ui/test_ui_voice_tab.py", "tests/browser/test_voice_tab.py"]

# name -> the edits (file, text, its replacement); each text occurs exactly once in its file
MUTANTS: dict[str, list[tuple[str, str, str]]] = {
    "a hushed turn's late sound plays": [
        (LINK, "if (turn < L.hushed || line !== L) return;", "if (line !== L) return;"),
        (LINK, "    if (turn < L.hushed) return;\n    // made", "    // made")],
    "a hush stops no sound": [
        (LINK, "for (const src of L.sources) { try { src.stop(); } catch (e) { /* already ended */ } }", "")],
    "a hush leaves the player held": [
        (LINK, "if (L.player.state === 'suspended') L.player.resume();  // a held", "// a held")],
    "a hold does not hold": [(LINK, "    L.player.suspend();\n", "\n")],
    "a resume does not play on": [(LINK, "    L.player.resume();\n  }\n\n  function play", "  }\n\n  function play")],
    "the gap between a sentence's pieces": [
        (LINK, "part ? L.endsAt : L.endsAt + CONFIG.gapS", "part ? L.endsAt + CONFIG.gapS : L.endsAt")],
    "never says it sounds": [(LINK, "} else if (at === now && L.ws", "} else if (false && L.ws")],
    "playback 10x louder": [(LINK, "out[i] = pcm[i] / 32768", "out[i] = pcm[i] / 3276.8")],
    "the microphone 10x quieter": [(LINK, "x < 0 ? x * 32768 : x * 32767", "x * 3276.7")],
    "frames 10x longer": [(LINK, "CONFIG.frameMs / 1000", "CONFIG.frameMs / 100")],
    "the hello's rate wrong": [(LINK, "rate: capture.sampleRate}));", "rate: 48000}));")],
    "Stop keeps the microphone": [(LINK, "    L.stream.getTracks().forEach((t) => t.stop());\n", "\n")],
    "Stop keeps the socket": [(LINK, "if (L.ws && L.ws.readyState <= WebSocket.OPEN) L.ws.close(1000);", "")],
    "Start again keeps the old line": [
        (LINK, "  async function start(token) {\n    stop();", "  async function start(token) {")],
    "the server's close keeps the microphone": [
        (LINK, "S.closed = {code: e.code, reason: e.reason}; if (line === L) stop();",
         "S.closed = {code: e.code, reason: e.reason};")],
    "start ignored": [(LINK, "if (msg.type === 'start') click('voice-heard-start');", "if (msg.type === 'start') {}")],
    "ask ignored": [(LINK, "S.asks.push(wall()); click('voice-heard-end');", "S.asks.push(wall());")],
    "the microphone to the speakers": [(LINK, "mute.gain.value = 0;", "mute.gain.value = 1;")],
    "a 4-byte send buffer": [(LINK, "const MAX_BUFFERED = 4 << 20;", "const MAX_BUFFERED = 4;")],
    "PCM and encoded sentences swapped": [
        (LINK, "rate ? samples(L, rate, new Int16Array(data, 12))",
         "!rate ? samples(L, rate, new Int16Array(data, 12))")],
    "Start clicks the camera's button whatever it says": [
        (PAGE, "if (/record/i.test(rec.textContent)) rec.click();", "rec.click();")],
    "the camera's access not asked for": [(PAGE, "  if (access) access.click();\n", "\n")],
    "Stop leaves the camera recording": [(PAGE, "if (rec && /stop/i.test(rec.textContent)) rec.click();", "")],
    "Stop leaves the line open": [(PAGE, "if (window.fastvlmVoice) window.fastvlmVoice.stop();", "")],
    "a failed line's reason swallowed": [
        (PAGE, "catch (e) { return [token, String((e && e.message) || e || 'unknown error')]; }",
         "catch (e) { return [token, '']; }")],
}


def mutate(root: Path, edits: list[tuple[str, str, str]]) -> None:
    for name, text, replacement in edits:
        path = root / name
        source = path.read_text()
        if source.count(text) != 1:
            raise ValueError(f"{name}: {text!r} occurs {source.count(text)} times, not once: "
                             "update tests/mutation_js.py")
        path.write_text(source.replace(text, replacement))


def probe(tests: list[str], root: Path = Path(".")) -> dict[str, str]:
    """Each mutant's fate: "killed" or "survived"."""
    command, fates = pytest_command(tests), {}
    with tempfile.TemporaryDirectory(prefix="mutation-js-") as folder:
        copy = Path(folder)
        copy_project(root, copy)
        scripts = {name: (copy / name).read_text() for name in (LINK, PAGE)}
        limit = time_limit(command, copy, "the page's scripts")
        for name, edits in MUTANTS.items():
            for script, text in scripts.items():  # the last mutant's edits undone
                (copy / script).write_text(text)
            mutate(copy, edits)
            fates[name] = "survived" if passes(command, copy, limit) else "killed"
            print(f"{fates[name]:>8}  {name}", flush=True)
    return fates


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tests", nargs="*", default=TESTS)
    fates = probe(parser.parse_args(argv).tests)
    survived = [name for name, fate in fates.items() if fate == "survived"]
    print(json.dumps({"mutants": len(fates), "survived": survived}, indent=1))


if __name__ == "__main__":
    main()
