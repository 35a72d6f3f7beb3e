#!/usr/bin/env node
// An independent BTSP client, written from docs/btsp.md and
// shared/spec/ecoprimals/BTSP-NOTES.md only (not from capmesh's Go code), so
// that a misreading shared by capmesh's client and server shows up as a
// failure against this one. Node.js built-ins only (crypto, net).
//
// Usage:
//   node client.js [options] ADDRESS [REQUEST...]
//
// ADDRESS is host:port (TCP, "[::1]:port" for IPv6) or a Unix socket path
// ("unix:" prefix optional). Each REQUEST is one JSON-RPC message; it is sent
// as one encrypted frame and the decrypted reply is printed as one line.
//
// Options:
//   --seed S        family seed (default: environment FAMILY_SEED)
//   --seed-base64   feed HKDF the base64 decoding of the seed, not its text
//   --binary        length-prefixed binary hello instead of JSON lines
//   --signal        send the 0xEC 0x01 first-byte signal before the hello
//   --cipher NAME   the one suite to prefer and allow (default
//                   BTSP_CHACHA20_POLY1305; BTSP_HMAC_PLAIN and BTSP_NULL too)
//   --timeout MS    give up after MS milliseconds (default 15000), exit 3
//   --unpadded      send base64 without '=' padding
//   --pipeline      send the first frame right after the ChallengeResponse,
//                   before HandshakeComplete arrives (same write)
//   --prefix HEX    raw bytes to send before the hello (after the signal)
//   --newline       end each frame's message with '\n'
//   --dribble       write the handshake and the frames one byte at a time
// Misbehaviour, for tests (each sends its frames, half-closes, then prints
// every reply it can still decrypt until the server closes):
//   --replay-frame  send the first request's frame twice
//   --flip N        flip the low bit of byte N (0-3 are the length) of the
//                   first post-handshake frame
//   --truncate      send the first frame minus the second half of its body
//   --nonce-reuse   seal the first two requests both with counter 0
//   --cleartext     no handshake: send the requests as plain lines
//   --hello-version N  claim handshake version N in the ClientHello
//   --low-order-key send the all-zero X25519 point as the client key
//
// Exit status: 0 success; 1 handshake failed (the server's error frame, or a
// check this client makes, is printed to stderr); 2 usage; 3 transport error
// (connection closed early, reply that does not open, timeout).
'use strict';

const crypto = require('crypto');
const net = require('net');

const CHACHA = 'BTSP_CHACHA20_POLY1305';
const HMAC_PLAIN = 'BTSP_HMAC_PLAIN';
const NULL_SUITE = 'BTSP_NULL';
const MAX_FRAME = 16 << 20;
const MAX_HELLO = 64 << 10;
// DER SubjectPublicKeyInfo header of an X25519 key (RFC 8410), before the
// 32 raw key bytes.
const X25519_SPKI = Buffer.from('302a300506032b656e032100', 'hex');

class UsageError extends Error {}
class HandshakeError extends Error {}
class TransportError extends Error {}

function parseArgs(argv) {
  const o = {
    seed: process.env.FAMILY_SEED, seedBase64: false, binary: false, signal: false,
    cipher: CHACHA, timeout: 15000, replay: false, flip: -1, truncate: false,
    nonceReuse: false, cleartext: false, address: null, requests: [],
    unpadded: false, pipeline: false, prefix: Buffer.alloc(0), newline: false,
    helloVersion: 1, lowOrder: false, dribble: false,
  };
  const rest = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) throw new UsageError(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--seed': o.seed = val(); break;
      case '--seed-base64': o.seedBase64 = true; break;
      case '--binary': o.binary = true; break;
      case '--signal': o.signal = true; break;
      case '--cipher': o.cipher = val(); break;
      case '--timeout': o.timeout = Number(val()); break;
      case '--replay-frame': o.replay = true; break;
      case '--flip': o.flip = Number(val()); break;
      case '--truncate': o.truncate = true; break;
      case '--nonce-reuse': o.nonceReuse = true; break;
      case '--cleartext': o.cleartext = true; break;
      case '--unpadded': o.unpadded = true; break;
      case '--pipeline': o.pipeline = true; break;
      case '--prefix': o.prefix = Buffer.from(val(), 'hex'); break;
      case '--newline': o.newline = true; break;
      case '--dribble': o.dribble = true; break;
      case '--hello-version': o.helloVersion = Number(val()); break;
      case '--low-order-key': o.lowOrder = true; break;
      default:
        if (a.startsWith('--')) throw new UsageError(`unknown option ${a}`);
        rest.push(a);
    }
  }
  if (rest.length === 0) throw new UsageError('missing ADDRESS');
  [o.address, ...o.requests] = rest;
  if (!Number.isInteger(o.flip) || o.flip < -1) throw new UsageError('--flip needs a byte index');
  if (!(o.timeout > 0)) throw new UsageError('--timeout needs a positive number');
  if (!o.cleartext && (o.seed === undefined || o.seed === '')) {
    throw new UsageError('no seed: pass --seed or set FAMILY_SEED');
  }
  if (o.pipeline && o.requests.length < 1) throw new UsageError('--pipeline needs a request');
  if (o.nonceReuse && o.requests.length < 2) throw new UsageError('--nonce-reuse needs two requests');
  if ((o.replay || o.flip >= 0 || o.truncate) && o.requests.length < 1) {
    throw new UsageError('misbehaviour needs a request');
  }
  return o;
}

function connectOptions(address) {
  if (address.startsWith('unix:')) return { path: address.slice(5) };
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(address) || /^([^/:]*):(\d+)$/.exec(address);
  if (m) return { host: m[1] || 'localhost', port: Number(m[2]) };
  return { path: address };
}

// Reader buffers a socket's bytes and hands them out exactly as asked.
class Reader {
  constructor(sock) {
    this.buf = Buffer.alloc(0);
    this.done = false;
    this.err = null;
    this.wake = null;
    sock.on('data', (d) => { this.buf = Buffer.concat([this.buf, d]); this.notify(); });
    sock.on('end', () => { this.done = true; this.notify(); });
    sock.on('close', () => { this.done = true; this.notify(); });
    sock.on('error', (e) => { this.err = e; this.done = true; this.notify(); });
  }

  notify() {
    const w = this.wake;
    this.wake = null;
    if (w) w();
  }

  async more(what) {
    if (this.done) {
      const why = this.err ? this.err.message : 'connection closed';
      const e = new TransportError(`${why} while reading ${what} (${this.buf.length} bytes buffered)`);
      e.eof = true;
      e.clean = this.buf.length === 0;
      throw e;
    }
    await new Promise((r) => { this.wake = r; });
  }

  async exact(n, what) {
    while (this.buf.length < n) await this.more(what);
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }

  async line(max, what) {
    for (;;) {
      const i = this.buf.indexOf(0x0a);
      if (i >= 0) {
        const out = this.buf.subarray(0, i);
        this.buf = this.buf.subarray(i + 1);
        return out;
      }
      if (this.buf.length > max) throw new TransportError(`${what}: line longer than ${max} bytes`);
      await this.more(what);
    }
  }
}

// send writes buf, one byte per write a millisecond apart with --dribble.
async function send(sock, o, buf) {
  if (!o.dribble) {
    sock.write(buf);
    return;
  }
  for (let i = 0; i < buf.length; i++) {
    sock.write(buf.subarray(i, i + 1));
    await new Promise((r) => { setTimeout(r, 1); });
  }
}

function be32(n) {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

// nonce is 4 zero bytes then the frame counter, 8 bytes big-endian.
function nonce(counter) {
  const b = Buffer.alloc(12);
  b.writeBigUInt64BE(BigInt(counter), 4);
  return b;
}

function hkdf(ikm, salt, info, n) {
  return Buffer.from(crypto.hkdfSync('sha256', ikm, salt, Buffer.from(info), n));
}

function hmac(key, ...parts) {
  const h = crypto.createHmac('sha256', key);
  for (const p of parts) h.update(p);
  return h.digest();
}

// b64 decodes standard base64, padded or not, and refuses anything else
// (Buffer.from would silently skip stray characters).
function b64(s, what, want) {
  if (typeof s !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) {
    throw new HandshakeError(`${what} is not standard base64: ${JSON.stringify(s)}`);
  }
  const b = Buffer.from(s, 'base64');
  if (want !== undefined && b.length !== want) {
    throw new HandshakeError(`${what} is ${b.length} bytes, want ${want}`);
  }
  return b;
}

// Suite seals and opens the frames of one direction.
class Suite {
  constructor(name, key) {
    this.name = name;
    this.key = key;
    this.counter = 0;
  }

  // frame returns len ‖ body for msg, sealed with the given counter.
  frameAt(msg, counter) {
    const n = nonce(counter);
    switch (this.name) {
      case CHACHA: {
        const len = be32(msg.length + 16);
        const c = crypto.createCipheriv('chacha20-poly1305', this.key, n, { authTagLength: 16 });
        c.setAAD(len, { plaintextLength: msg.length });
        const ct = Buffer.concat([c.update(msg), c.final()]);
        return Buffer.concat([len, ct, c.getAuthTag()]);
      }
      case HMAC_PLAIN: {
        const len = be32(msg.length + 32);
        return Buffer.concat([len, msg, hmac(this.key, n, len, msg)]);
      }
      case NULL_SUITE:
        return Buffer.concat([be32(msg.length), msg]);
      default:
        throw new Error(`no suite ${this.name}`);
    }
  }

  seal(msg) {
    return this.frameAt(msg, this.counter++);
  }

  open(len, body) {
    const n = nonce(this.counter++);
    switch (this.name) {
      case CHACHA: {
        if (body.length < 16) throw new TransportError('frame shorter than its tag');
        const d = crypto.createDecipheriv('chacha20-poly1305', this.key, n, { authTagLength: 16 });
        d.setAAD(len, { plaintextLength: body.length - 16 });
        d.setAuthTag(body.subarray(body.length - 16));
        try {
          return Buffer.concat([d.update(body.subarray(0, body.length - 16)), d.final()]);
        } catch (e) {
          throw new TransportError(`reply frame failed authentication: ${e.message}`);
        }
      }
      case HMAC_PLAIN: {
        if (body.length < 32) throw new TransportError('frame shorter than its MAC');
        const msg = body.subarray(0, body.length - 32);
        if (!crypto.timingSafeEqual(hmac(this.key, n, len, msg), body.subarray(body.length - 32))) {
          throw new TransportError('reply frame failed authentication');
        }
        return msg;
      }
      default:
        return body;
    }
  }
}

// Handshake runs the four messages in the chosen framing and returns the
// two directions' suites.
async function handshake(sock, rd, o) {
  const enc = (obj) => {
    const j = Buffer.from(JSON.stringify(obj));
    return o.binary ? Buffer.concat([be32(j.length), j]) : Buffer.concat([j, Buffer.from('\n')]);
  };
  const b64out = (b) => (o.unpadded ? b.toString('base64').replace(/=+$/, '') : b.toString('base64'));
  const recv = async (what) => {
    let raw;
    if (o.binary) {
      const n = (await rd.exact(4, what)).readUInt32BE(0);
      if (n > MAX_HELLO) throw new HandshakeError(`${what}: ${n} bytes, more than 64 KiB`);
      raw = await rd.exact(n, what);
    } else {
      raw = await rd.line(MAX_HELLO, what);
    }
    let msg;
    try {
      msg = JSON.parse(raw.toString('utf8'));
    } catch (e) {
      throw new HandshakeError(`${what} is not JSON: ${JSON.stringify(raw.toString('utf8'))}`);
    }
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) {
      throw new HandshakeError(`${what} is not a JSON object`);
    }
    if (msg.error !== undefined) {
      const e = new HandshakeError(`server error frame: ${raw.toString('utf8')}`);
      e.frame = raw.toString('utf8');
      throw e;
    }
    return msg;
  };

  const seed = o.seedBase64 ? Buffer.from(o.seed, 'base64') : Buffer.from(o.seed, 'utf8');
  const hk = hkdf(seed, Buffer.from('btsp-v1'), 'handshake', 32);
  const { publicKey, privateKey } = crypto.generateKeyPairSync('x25519');
  const cpub = o.lowOrder ? Buffer.alloc(32)
    : publicKey.export({ format: 'der', type: 'spki' }).subarray(X25519_SPKI.length);

  const hello = enc({ protocol: 'btsp', version: o.helloVersion, client_ephemeral_pub: b64out(cpub) });
  await send(sock, o, Buffer.concat([Buffer.from(o.signal ? [0xec, 0x01] : []), o.prefix, hello]));

  const sh = await recv('ServerHello');
  if (sh.version !== 1) throw new HandshakeError(`ServerHello version ${JSON.stringify(sh.version)}`);
  const spub = b64(sh.server_ephemeral_pub, 'server_ephemeral_pub', 32);
  const challenge = b64(sh.challenge, 'challenge', 32);

  const response = hmac(hk, challenge, cpub, spub);
  const resp = enc({ response: b64out(response), preferred_cipher: o.cipher });
  const keys = sessionKeys(privateKey, spub, hk);
  let early = null;
  if (o.pipeline) {
    // The keys do not depend on HandshakeComplete: assume the preferred suite.
    early = new Suite(o.cipher, keys.subarray(0, 32));
    await send(sock, o, Buffer.concat([resp, early.seal(message(o.requests[0], o))]));
  } else {
    await send(sock, o, resp);
  }

  const done = await recv('HandshakeComplete');
  if (done.cipher !== o.cipher) {
    throw new HandshakeError(`server chose cipher ${JSON.stringify(done.cipher)}, this client allows only ${o.cipher}`);
  }
  if (typeof done.session_id !== 'string' || !/^[0-9a-f]{32}$/i.test(done.session_id)) {
    throw new HandshakeError(`session_id ${JSON.stringify(done.session_id)} is not 16 bytes of hex`);
  }

  return {
    out: early || new Suite(done.cipher, keys.subarray(0, 32)),
    in: new Suite(done.cipher, keys.subarray(32, 64)),
    sessionID: done.session_id,
    pipelined: early !== null,
  };
}

// sessionKeys derives okm: client→server key, then server→client key.
function sessionKeys(privateKey, spub, hk) {
  const peer = crypto.createPublicKey({ key: Buffer.concat([X25519_SPKI, spub]), format: 'der', type: 'spki' });
  const shared = crypto.diffieHellman({ privateKey, publicKey: peer });
  if (shared.every((b) => b === 0)) throw new HandshakeError('server key is of low order');
  return hkdf(shared, hk, 'btsp-session-v1', 64);
}

// message is a request as a frame carries it.
function message(req, o) {
  return Buffer.from(o.newline ? req + '\n' : req);
}

// readReply reads one frame and returns its message.
async function readReply(rd, suite) {
  const len = await rd.exact(4, 'reply frame length');
  const n = len.readUInt32BE(0);
  if (n > MAX_FRAME) throw new TransportError(`reply frame of ${n} bytes, more than 16 MiB`);
  const body = await rd.exact(n, 'reply frame body');
  return suite.open(len, body);
}

function printMessage(msg) {
  const s = msg.toString('utf8');
  process.stdout.write(s.endsWith('\n') ? s : s + '\n');
}

// drain prints every reply still readable until the server closes.
async function drain(rd, suite) {
  for (;;) {
    try {
      printMessage(await readReply(rd, suite));
    } catch (e) {
      if (e instanceof TransportError) {
        process.stderr.write(`client: ${e.message}\n`);
        return;
      }
      throw e;
    }
  }
}

async function cleartext(sock, rd, o) {
  for (const r of o.requests) sock.write(r + '\n');
  sock.end();
  for (;;) {
    let line;
    try {
      line = await rd.line(MAX_FRAME, 'cleartext reply');
    } catch (e) {
      if (e instanceof TransportError && e.eof) {
        if (rd.buf.length > 0) printMessage(rd.buf);
        return;
      }
      throw e;
    }
    printMessage(line);
  }
}

async function misbehave(sock, rd, s, o) {
  const reqs = o.requests.map((r) => message(r, o));
  if (o.replay) {
    const f = s.out.seal(reqs[0]);
    sock.write(f);
    sock.write(f);
  } else if (o.flip >= 0) {
    const f = s.out.seal(reqs[0]);
    if (o.flip >= f.length) throw new UsageError(`--flip ${o.flip}: the frame has ${f.length} bytes`);
    f[o.flip] ^= 0x01;
    sock.write(f);
  } else if (o.truncate) {
    const f = s.out.seal(reqs[0]);
    sock.write(f.subarray(0, 4 + Math.floor((f.length - 4) / 2)));
  } else if (o.nonceReuse) {
    sock.write(s.out.frameAt(reqs[0], 0));
    sock.write(s.out.frameAt(reqs[1], 0));
  }
  sock.end();
  await drain(rd, s.in);
}

async function run(o) {
  const sock = net.createConnection(connectOptions(o.address));
  sock.setNoDelay(true);
  const rd = new Reader(sock);
  await new Promise((resolve, reject) => {
    sock.once('connect', resolve);
    sock.once('error', (e) => reject(new TransportError(`connect ${o.address}: ${e.message}`)));
  });
  try {
    if (o.cleartext) return await cleartext(sock, rd, o);
    const s = await handshake(sock, rd, o);
    process.stderr.write(`client: session ${s.sessionID} cipher ${s.out.name}\n`);
    if (o.replay || o.flip >= 0 || o.truncate || o.nonceReuse) return await misbehave(sock, rd, s, o);
    for (let i = 0; i < o.requests.length; i++) {
      if (!(i === 0 && s.pipelined)) await send(sock, o, s.out.seal(message(o.requests[i], o)));
    }
    for (let i = 0; i < o.requests.length; i++) printMessage(await readReply(rd, s.in));
    return undefined;
  } finally {
    sock.destroy();
  }
}

async function main() {
  let o;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`client: ${e.message}\nusage: node client.js [options] ADDRESS [REQUEST...]\n`);
    return 2;
  }
  const timer = setTimeout(() => {
    process.stderr.write(`client: timed out after ${o.timeout} ms\n`);
    process.exit(3);
  }, o.timeout);
  try {
    await run(o);
    return 0;
  } catch (e) {
    if (e.frame !== undefined) {
      process.stderr.write(`${e.frame}\n`);
    }
    process.stderr.write(`client: ${e.message}\n`);
    if (e instanceof HandshakeError) return 1;
    if (e instanceof UsageError) return 2;
    return 3;
  } finally {
    clearTimeout(timer);
  }
}

main().then((code) => { process.exitCode = code; });
