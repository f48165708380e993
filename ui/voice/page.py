"""The Voice + camera tab's own scripts and style in the page: what Start, Stop and push to talk run in the browser
(beside the Python handlers in `tab`), and how the status line looks."""

# Start/Stop also start/stop the webcam's stream and the microphone, so one click does all (written against
# Gradio 6's webcam and microphone markup; if that changes, the camera's and microphone's own buttons still work).
CAMERA_JS = """
  const cam = document.getElementById('voice-camera');
  const access = cam && cam.querySelector('[title="grant webcam access"] button');
  if (access) access.click();
  for (let i = 0; cam && i < 50; i++) {
    const rec = cam.querySelector('button[aria-label="capture photo"]');
    if (rec) { if (/record/i.test(rec.textContent)) rec.click(); break; }
    await new Promise((r) => setTimeout(r, 100));
  }"""
CAMERA_ON_JS = f"""async (...args) => {{{CAMERA_JS}
  return args;
}}"""
# After Start has issued the line's token: open the microphone and the line (link.js); '' or why it failed
LINE_JS = """async (token) => {
  try { await window.fastvlmVoice.start(token); return [token, '']; }
  catch (e) { return [token, String((e && e.message) || e || 'unknown error')]; }
}"""
STOP_JS = """(...args) => {
  if (window.fastvlmVoice) window.fastvlmVoice.stop();
  const rec = document.querySelector('#voice-camera button[aria-label="capture photo"]');
  if (rec && /stop/i.test(rec.textContent)) rec.click();
  return args;
}"""
STATUS_CSS = """.voice-status { font-size: 1.35em; font-weight: 600; padding: 0.35em 0.6em; border-radius: 8px;
  border: 1px solid var(--border-color-primary); background: var(--block-background-fill); }
.voice-status.ready { font-size: 1.05em; font-weight: 500; }
.voice-status .dot { margin-right: 0.3em; }
.listening .dot { color: #16a34a; } .hearing .dot { color: #dc2626; }
.thinking .dot { color: #d97706; } .speaking .dot { color: #2563eb; }
.voice-engine { font-size: 0.9em; opacity: 0.8; min-height: 1.3em; }"""
