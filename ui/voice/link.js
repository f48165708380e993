// The page's side of the voice line (ui/voice/link.py): the microphone as 16-bit PCM frames over a WebSocket,
// the spoken answer played as it arrives. `window.fastvlmVoice.start(token)` / `.stop()`; the tab's Start and
// Stop call them. `window.__fvLink` keeps what happened, for the tests and the browser bench (wall-clock ms).
(() => {
  const CONFIG = __CONFIG__;  // {constraints, frameMs, gapS, path}: filled in by ui/voice/capture.py
  const WORKLET = `
class FastvlmPcm extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.size = options.processorOptions.size;
    this.buf = new Int16Array(this.size);
    this.n = 0;
  }
  process(inputs) {
    const ch = inputs[0] && inputs[0][0];
    if (!ch) return true;
    for (let i = 0; i < ch.length; i++) {
      const x = Math.max(-1, Math.min(1, ch[i]));
      this.buf[this.n++] = x < 0 ? x * 32768 : x * 32767;
      if (this.n === this.size) {
        this.port.postMessage(this.buf.buffer, [this.buf.buffer]);
        this.buf = new Int16Array(this.size);
        this.n = 0;
      }
    }
    return true;
  }
}
registerProcessor('fastvlm-pcm', FastvlmPcm);`;
  const MAX_BUFFERED = 4 << 20;  // bytes waiting in the socket before frames are dropped (~2 min of audio)
  const S = window.__fvLink = {state: 'off', frames: 0, dropped: 0, plays: [], parts: 0, late: 0, hushes: [],
                             holds: [], sounding: [], asks: [], closed: null};
  const wall = () => performance.timeOrigin + performance.now();
  let line = null;

  const click = (id) => { const el = document.getElementById(id); if (el) el.click(); };

  function opened(ws) {
    return new Promise((resolve, reject) => {
      ws.onopen = () => resolve();
      ws.onerror = () => reject(new Error('the voice line could not connect (a proxy must pass WebSocket ' +
                                          'upgrades for ' + CONFIG.path + ')'));
      ws.onclose = (e) => reject(new Error(e.reason || 'the voice line closed'));
    });
  }

  function send(L, buffer) {
    if (L.ws.readyState !== WebSocket.OPEN) return;
    if (L.ws.bufferedAmount > MAX_BUFFERED) { S.dropped++; return; }
    L.ws.send(buffer);
    S.frames++;
  }

  // the sentences sounding or waiting to (each may be several parts)
  const sentences = (L) => new Set([...L.sources].map((src) => src.sentence)).size;

  function hush(L, turn) {
    L.hushed = Math.max(L.hushed, turn);
    if (L.sources.size) S.hushes.push({at: wall(), stopped: sentences(L)});
    for (const src of L.sources) { try { src.stop(); } catch (e) { /* already ended */ } }
    L.sources.clear();
    L.endsAt = -Infinity;
    if (L.player.state === 'suspended') L.player.resume();  // a held sound is dropped: the next turn plays
  }

  function hold(L) {  // speech over the answer, not yet a question: its sound stands still where it is
    if (L.player.state !== 'running') return;
    S.holds.push({at: wall(), sounding: sentences(L), resumed: null});
    L.player.suspend();
  }

  function playOn(L) {  // the speech over it ended short of a question (a cough): the answer goes on
    if (L.player.state !== 'suspended') return;
    if (S.holds.length) S.holds[S.holds.length - 1].resumed = wall();
    L.player.resume();
  }

  function play(L, turn, part, buffer) {  // part 0 starts a sentence after the gap, the next parts follow it
    if (turn < L.hushed || line !== L) return;
    const now = L.player.currentTime, at = Math.max(now, part ? L.endsAt : L.endsAt + CONFIG.gapS);
    if (part) {
      S.parts++;
      if (at !== L.endsAt) S.late++;  // not on from the part before: a gap in the sentence
    } else if (at === now && L.ws.readyState === WebSocket.OPEN) {  // sound again after a silence: the server
      L.ws.send(JSON.stringify({type: 'sounding', turn}));           // times its echo rule from here
      S.sounding.push(wall());
    }
    const src = L.player.createBufferSource();
    src.buffer = buffer;
    src.sentence = part ? L.sentence : ++L.sentence;
    src.connect(L.player.destination);
    src.onended = () => L.sources.delete(src);
    src.start(at);
    L.sources.add(src);
    L.endsAt = at + buffer.duration;
    if (part) return;
    const starts = wall() + (at - now) * 1000;
    S.plays.push(starts);
    window.dispatchEvent(new CustomEvent('fastvlm-voice-playing', {detail: {at: starts, turn}}));
  }

  function samples(L, rate, pcm) {  // 16-bit mono PCM at `rate` -> an AudioBuffer (Web Audio resamples it)
    const buffer = L.player.createBuffer(1, Math.max(1, pcm.length), rate), out = buffer.getChannelData(0);
    for (let i = 0; i < pcm.length; i++) out[i] = pcm[i] / 32768;
    return buffer;
  }

  function receive(L, data) {
    if (typeof data === 'string') {
      const msg = JSON.parse(data);
      if (msg.type === 'start') click('voice-heard-start');
      else if (msg.type === 'ask') { S.asks.push(wall()); click('voice-heard-end'); }
      else if (msg.type === 'hush') hush(L, msg.turn);
      else if (msg.type === 'pause') hold(L);
      else if (msg.type === 'resume') playOn(L);
      return;
    }
    const head = new DataView(data), turn = head.getUint32(0, true), rate = head.getUint32(4, true),
          part = head.getUint32(8, true);
    if (turn < L.hushed) return;
    // made one after another, so sentences (and their pieces) play in the order they were said
    L.decoding = L.decoding.then(() => rate ? samples(L, rate, new Int16Array(data, 12))
                                            : L.player.decodeAudioData(data.slice(12)))
      .then((buffer) => play(L, turn, part, buffer), (e) => console.warn('fastvlm: a sentence could not be played', e));
  }

  async function start(token) {
    stop();
    const stream = await navigator.mediaDevices.getUserMedia({audio: CONFIG.constraints});
    const L = {stream, capture: null, player: null, ws: null, hushed: 0, endsAt: -Infinity, sentence: 0,
               sources: new Set(), decoding: Promise.resolve()};
    line = L;
    try {  // whatever fails on the way (an audio context, the worklet, the line) closes all it opened
      await connect(L, token);
    } catch (e) {
      if (line === L) stop();
      throw e;
    }
    S.state = 'on';
    S.rate = L.capture.sampleRate;
  }

  async function connect(L, token) {  // the microphone's stream to the server, the server's sound to the speaker
    const capture = L.capture = new AudioContext({sampleRate: 16000});
    L.player = new AudioContext();
    const code = URL.createObjectURL(new Blob([WORKLET], {type: 'application/javascript'}));
    await capture.audioWorklet.addModule(code);
    URL.revokeObjectURL(code);
    const url = new URL(CONFIG.path, document.baseURI);  // the token goes in the hello, not the URL
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    L.ws = new WebSocket(url);
    L.ws.binaryType = 'arraybuffer';
    await opened(L.ws);
    L.ws.onmessage = (e) => receive(L, e.data);
    L.ws.onclose = (e) => { S.closed = {code: e.code, reason: e.reason}; if (line === L) stop(); };
    L.ws.send(JSON.stringify({type: 'hello', token, rate: capture.sampleRate}));
    const size = Math.round(capture.sampleRate * CONFIG.frameMs / 1000);
    const node = new AudioWorkletNode(capture, 'fastvlm-pcm', {processorOptions: {size}});
    node.port.onmessage = (e) => send(L, e.data);
    const mute = capture.createGain();  // the worklet is pulled by the destination; nothing is heard
    mute.gain.value = 0;
    capture.createMediaStreamSource(L.stream).connect(node);
    node.connect(mute).connect(capture.destination);
  }

  function stop() {
    const L = line;
    line = null;
    if (!L) return;
    S.state = 'off';
    if (L.player) hush(L, Infinity);
    if (L.ws && L.ws.readyState <= WebSocket.OPEN) L.ws.close(1000);
    L.stream.getTracks().forEach((t) => t.stop());
    for (const context of [L.capture, L.player]) if (context) context.close();
  }

  window.fastvlmVoice = {start, stop};
})();
