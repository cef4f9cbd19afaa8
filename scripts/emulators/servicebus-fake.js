#!/usr/bin/env node
// servicebus-fake.js: a small fake Azure Service Bus broker for the worker's tests.
//
// Microsoft's Service Bus emulator runs only in Docker, and plain AMQP brokers cannot answer
// the claims-based-security (CBS) handshake the azservicebus SDK performs, so the repository
// owns this fake (see /work/shared/reference/azure-backends.md, section 2). It speaks AMQP 1.0
// through rhea and models just what a sender and a test's receiver see:
//
//   - SASL ANONYMOUS, then CBS put-token on $cbs. With --key the SAS token is checked the way
//     Service Bus checks it (key name, expiry, HMAC-SHA256 over "<sr>\n<se>", resource covers
//     the audience) and answered 202 or 401; an entity attach without a claim is refused.
//   - queues, and topics fanning out to their subscriptions (<topic>/Subscriptions/<sub>);
//   - peek-lock (settled once the client accepts, releases or rejects) and receive-and-delete;
//   - scheduled enqueue time (held until due), batches (message format 0x80013700);
//   - amqp:not-found for unknown entities, unless --auto-create.
//
// Messages are forwarded byte for byte: only the header and message annotations are rebuilt,
// so every AMQP type the sender chose reaches the receiver unchanged. Not modelled: sessions,
// duplicate detection, TTL expiry, lock expiry, dead-letter queues, management operations
// (answered 501), message-id assignment.
//
// Usage:
//   node servicebus-fake.js --port 0 [--host 127.0.0.1] [--http-port 0]
//        [--key-name RootManageSharedAccessKey] [--key <key>]   (or SB_FAKE_KEY in the env)
//        [--queue q1,q2] [--topic t:s1,s2 ...] [--auto-create]
//        [--tls-cert cert.pem --tls-key key.pem]   (AMQP over TLS, as Azure's port 5671)
//
// Once listening it prints {"event":"listening","port":N,"httpPort":M} on stdout, then one JSON
// line per connection, CBS call and message. The HTTP port serves GET /stats (counters),
// GET /messages (the journal), PUT /queues/<q> and PUT /topics/<t>/subscriptions/<s>.
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const http = require('http');
const rhea = require('rhea');

const types = rhea.types;
const amqpMessage = rhea.message;

// rhea decodes a transfer before handing it over and keeps no raw bytes; forwarding byte for
// byte needs them, so the decoder is wrapped to remember its input.
const decodeMessage = amqpMessage.decode;
amqpMessage.decode = (buf) => {
  const m = decodeMessage(buf);
  Object.defineProperty(m, 'raw', { value: Buffer.from(buf) });
  return m;
};

const BATCH_FORMAT = 0x80013700;
const MAX_MESSAGE_SIZE = 262144; // Standard tier
const LOCK_MS = 60000;

function parseArgs(argv) {
  const o = { port: 5672, host: '127.0.0.1', httpPort: 0, keyName: 'RootManageSharedAccessKey',
    key: process.env.SB_FAKE_KEY || '', queues: [], topics: [], autoCreate: false,
    tlsCert: '', tlsKey: '' };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    const next = () => argv[++i];
    switch (a) {
      case '--port': o.port = Number(next()); break;
      case '--host': o.host = next(); break;
      case '--http-port': o.httpPort = Number(next()); break;
      case '--key-name': o.keyName = next(); break;
      case '--key': o.key = next(); break;
      case '--queue': o.queues.push(...next().split(',').filter(Boolean)); break;
      case '--topic': { const [t, subs] = next().split(':'); o.topics.push([t, (subs || '').split(',').filter(Boolean)]); break; }
      case '--auto-create': o.autoCreate = true; break;
      case '--tls-cert': o.tlsCert = next(); break;
      case '--tls-key': o.tlsKey = next(); break;
      default: throw new Error('unknown argument ' + a);
    }
  }
  return o;
}

const opts = parseArgs(process.argv);
const log = (event, fields) => process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
const stats = { connections: 0, putTokens: 0, putTokenFailures: 0, messages: 0 };
const journal = [];

// --- entities --------------------------------------------------------------------------------

// Entity names are case-insensitive in Service Bus.
const queues = new Map(); // lower-case path -> Queue (queues and subscriptions alike)
const topics = new Map(); // lower-case topic -> Map(lower-case sub -> Queue)
let sequence = 0;

class Queue {
  constructor(path) { this.path = path; this.messages = []; this.consumers = new Set(); }
}

function createQueue(name) {
  const k = name.toLowerCase();
  if (!queues.has(k)) queues.set(k, new Queue(name));
  return queues.get(k);
}

function createSubscription(topic, sub) {
  const t = topics.get(topic.toLowerCase()) || new Map();
  topics.set(topic.toLowerCase(), t);
  if (sub && !t.has(sub.toLowerCase())) t.set(sub.toLowerCase(), createQueue(topic + '/Subscriptions/' + sub));
  return t;
}

// sendTarget resolves the target of a client's sender: the queues a message sent there lands in.
function sendTarget(address) {
  const k = address.toLowerCase();
  if (topics.has(k)) return [...topics.get(k).values()];
  if (queues.has(k) && !k.includes('/')) return [queues.get(k)];
  if (opts.autoCreate && !k.includes('/')) return [createQueue(address)];
  return null;
}

// receiveSource resolves the source of a client's receiver: a queue or a subscription.
function receiveSource(address) {
  const k = address.toLowerCase();
  if (queues.has(k)) return queues.get(k);
  if (!opts.autoCreate) return null;
  const m = /^([^/]+)\/subscriptions\/([^/]+)$/i.exec(address);
  if (m) { createSubscription(m[1], m[2]); return queues.get(k); }
  return k.includes('/') ? null : createQueue(address);
}

// --- messages --------------------------------------------------------------------------------

// sections splits an encoded message into its sections, keeping each one's bytes.
function sections(buf) {
  const r = new types.Reader(buf);
  const out = [];
  while (r.remaining()) {
    const start = r.position;
    const s = r.read();
    out.push({ code: Number(s.descriptor.value), typed: s, bytes: buf.subarray(start, r.position) });
  }
  return out;
}

// enqueue stores one encoded message in every queue the target resolves to.
function enqueue(targets, entity, raw) {
  const decoded = decodeMessage(raw);
  const secs = sections(raw);
  const ann = secs.find((s) => s.code === 0x72);
  const scheduled = decoded.message_annotations && decoded.message_annotations['x-opt-scheduled-enqueue-time'];
  const availableAt = scheduled instanceof Date ? scheduled.getTime() : 0;
  const seq = ++sequence;
  stats.messages++;
  const entry = describe(entity, seq, decoded, secs);
  journal.push(entry);
  log('message', entry);
  for (const q of targets) {
    q.messages.push({ seq, enqueued: Date.now(), availableAt, deliveryCount: 0, decoded,
      annotations: ann ? ann.typed.value : [], rest: secs.filter((s) => s.code >= 0x73).map((s) => s.bytes) });
    if (availableAt > Date.now()) setTimeout(() => pump(q), availableAt - Date.now());
    pump(q);
  }
}

// describe is the journal entry of a message: its properties, and application properties with
// their AMQP wire types (what a test cannot see through the SDK).
function describe(entity, seq, m, secs) {
  const props = {};
  const app = secs.find((s) => s.code === 0x74);
  if (app) {
    for (let i = 0; i + 1 < app.typed.value.length; i += 2) {
      props[String(app.typed.value[i].value)] = app.typed.value[i + 1].type.name + ':' + JSON.stringify(app.typed.value[i + 1].value);
    }
  }
  const body = m.body && m.body.content !== undefined ? m.body.content : m.body;
  return { entity, seq, message_id: m.message_id, correlation_id: m.correlation_id, content_type: m.content_type,
    subject: m.subject, to: m.to, reply_to: m.reply_to, group_id: m.group_id, reply_to_group_id: m.reply_to_group_id,
    ttl: m.ttl, annotations: m.message_annotations, application_properties: props,
    body: Buffer.isBuffer(body) ? body.toString('utf8') : body };
}

// encodeFor rebuilds header and annotations around the sender's own sections.
function encodeFor(stored, lockedUntil) {
  const d = stored.decoded;
  const header = amqpMessage.header({ durable: d.durable, priority: d.priority, ttl: d.ttl,
    first_acquirer: d.first_acquirer, delivery_count: stored.deliveryCount }).described();
  const items = stored.annotations.concat([
    types.wrap_symbol('x-opt-sequence-number'), types.wrap_long(stored.seq),
    types.wrap_symbol('x-opt-enqueued-time'), types.wrap_timestamp(stored.enqueued)]);
  if (lockedUntil) items.push(types.wrap_symbol('x-opt-locked-until'), types.wrap_timestamp(lockedUntil));
  const w = new types.Writer();
  w.write(header);
  w.write(types.described_nc(types.wrap_ulong(0x72), types.Map32(items)));
  return Buffer.concat([w.toBuffer(), ...stored.rest]);
}

// pump hands available messages to consumers with credit, oldest first.
function pump(q) {
  for (const link of q.consumers) {
    while (link.sendable()) {
      const i = q.messages.findIndex((m) => m.availableAt <= Date.now());
      if (i < 0) return;
      const [m] = q.messages.splice(i, 1);
      const peekLock = link.local.attach.snd_settle_mode !== 1;
      const d = link.send(encodeFor(m, peekLock ? Date.now() + LOCK_MS : 0), crypto.randomBytes(16), 0);
      if (peekLock) link.outstanding.set(d, m);
    }
  }
}

function requeue(q, m) {
  m.deliveryCount++;
  q.messages.unshift(m);
  pump(q);
}

// --- CBS and RPC -------------------------------------------------------------------------------

function checkToken(token, audience) {
  if (!opts.key) return null; // no key configured: every token is accepted, like the emulator
  const m = /^SharedAccessSignature (.*)$/.exec(typeof token === 'string' ? token : '');
  if (!m) return 'malformed token';
  const p = {};
  for (const kv of m[1].split('&')) { const i = kv.indexOf('='); p[kv.slice(0, i)] = kv.slice(i + 1); }
  if (p.skn !== opts.keyName) return 'unknown key name';
  if (!(Number(p.se) > Date.now() / 1000)) return 'token expired';
  const want = Buffer.from(crypto.createHmac('sha256', opts.key).update(p.sr + '\n' + p.se).digest('base64'));
  const got = Buffer.from(decodeURIComponent(p.sig || ''));
  if (want.length !== got.length || !crypto.timingSafeEqual(want, got)) return 'signature mismatch';
  if (!String(audience).toLowerCase().startsWith(decodeURIComponent(p.sr || '').toLowerCase())) return 'token does not cover the audience';
  return null;
}

// claimPath is the entity path an audience such as amqp://host:port/jobs authorizes.
function claimPath(audience) {
  try { return new URL(audience).pathname.replace(/^\//, '').toLowerCase(); } catch (e) { return null; }
}

function authorized(conn, address) {
  if (!opts.key) return true;
  const k = address.toLowerCase();
  for (const c of conn.claims) if (c === '' || k === c || k.startsWith(c + '/')) return true;
  return false;
}

function reply(context, req, status, description, body) {
  const conn = context.connection;
  const link = conn.replyLinks.get(req.reply_to);
  if (!link) return log('error', { message: 'no reply link for ' + req.reply_to });
  link.send({ correlation_id: req.message_id, body,
    application_properties: { 'status-code': types.wrap_int(status), 'status-description': description } });
}

function putToken(context) {
  const req = context.message;
  const ap = req.application_properties || {};
  let err = ap.operation === 'put-token' ? null : 'unsupported operation';
  if (!err && ap.type === 'servicebus.windows.net:sastoken') err = checkToken(req.body, ap.name);
  if (!err && claimPath(ap.name) === null) err = 'bad audience';
  stats.putTokens++;
  if (err) stats.putTokenFailures++;
  else context.connection.claims.add(claimPath(ap.name));
  log('put-token', { audience: ap.name, type: ap.type, status: err ? 401 : 202, error: err || undefined });
  reply(context, req, err ? 401 : 202, err || 'Accepted');
}

// --- links -------------------------------------------------------------------------------------

const isRpc = (a) => a === '$cbs' || /\/\$management$/i.test(a);

function echoAttach(link, source, target) {
  link.set_source({ address: source });
  link.set_target({ address: target });
  link.local.attach.snd_settle_mode = link.remote.attach.snd_settle_mode;
  link.local.attach.rcv_settle_mode = link.remote.attach.rcv_settle_mode;
}

const container = rhea.create_container({ id: 'servicebus-fake' });

container.on('connection_open', (context) => {
  const c = context.connection;
  c.claims = new Set();
  c.replyLinks = new Map();
  c.consumers = new Set();
  stats.connections++;
  log('connection', { hostname: c.remote.open && c.remote.open.hostname });
});

// The client's receiver attached: the broker sends on it (RPC replies or entity messages).
container.on('sender_open', (context) => {
  const link = context.sender;
  const source = link.remote.attach.source && link.remote.attach.source.address;
  const target = link.remote.attach.target && link.remote.attach.target.address;
  if (isRpc(source)) {
    echoAttach(link, source, target);
    context.connection.replyLinks.set(target, link);
    return;
  }
  if (!authorized(context.connection, source)) return refuse(link, 'amqp:unauthorized-access', 'no claim for ' + source);
  const q = receiveSource(source || '');
  if (!q) return refuse(link, 'amqp:not-found', 'The messaging entity ' + source + ' could not be found.');
  echoAttach(link, source, target);
  link.queue = q;
  link.outstanding = new Map();
  q.consumers.add(link);
  context.connection.consumers.add(link);
  link.on('sendable', () => pump(q));
  link.on('sender_draining', () => { pump(q); if (link.credit > 0) link.set_drained(true); });
  // Peek-lock: the client sends its outcome unsettled and waits for the broker to settle it.
  const settle = (outcome, requeueIt) => (ctx) => {
    const m = link.outstanding.get(ctx.delivery);
    link.outstanding.delete(ctx.delivery);
    ctx.delivery.update(true, outcome().described());
    if (m && requeueIt) requeue(q, m);
  };
  link.on('accepted', settle(amqpMessage.accepted, false));
  link.on('rejected', settle(amqpMessage.rejected, false)); // no dead-letter queue in the fake: dropped
  link.on('released', settle(amqpMessage.released, true)); // rhea reports modified as released
});

// The client's sender attached: the broker receives on it.
container.on('receiver_open', (context) => {
  const link = context.receiver;
  const target = link.remote.attach.target && link.remote.attach.target.address;
  const source = link.remote.attach.source && link.remote.attach.source.address;
  if (!isRpc(target)) {
    if (!authorized(context.connection, target)) return refuse(link, 'amqp:unauthorized-access', 'no claim for ' + target);
    if (!sendTarget(target || '')) return refuse(link, 'amqp:not-found', 'The messaging entity ' + target + ' could not be found.');
  }
  echoAttach(link, source, target);
  link.local.attach.max_message_size = MAX_MESSAGE_SIZE;
});

function refuse(link, condition, description) {
  log('refused', { condition, description });
  link.close({ condition, description });
}

container.on('message', (context) => {
  const target = context.receiver.remote.attach.target.address;
  if (target === '$cbs') return putToken(context);
  if (isRpc(target)) return reply(context, context.message, 501, 'management operations are not implemented by the fake');
  const dest = sendTarget(target);
  if (!dest) return;
  if (context.format === BATCH_FORMAT) {
    for (const s of sections(context.message)) if (s.code === 0x75) enqueue(dest, target, s.typed.value);
  } else {
    enqueue(dest, target, context.message.raw);
  }
});

// A consumer that goes away gives its locked messages back.
function dropConsumers(context) {
  const c = context.connection;
  for (const link of c.consumers || []) {
    link.queue.consumers.delete(link);
    for (const m of link.outstanding.values()) requeue(link.queue, m);
    link.outstanding.clear();
  }
  if (c.consumers) c.consumers.clear();
}
container.on('sender_close', (context) => {
  const link = context.sender;
  const target = link.remote.attach && link.remote.attach.target;
  if (target) context.connection.replyLinks.delete(target.address);
  if (!link.queue) return;
  link.queue.consumers.delete(link);
  context.connection.consumers.delete(link);
  for (const m of link.outstanding.values()) requeue(link.queue, m);
  link.outstanding.clear();
});
container.on('connection_close', dropConsumers);
container.on('disconnected', dropConsumers);
container.on('error', (e) => log('error', { message: String(e && e.message) }));

// --- HTTP control ------------------------------------------------------------------------------

function control(req, res) {
  const send = (code, body) => { res.writeHead(code, { 'content-type': 'application/json' }); res.end(JSON.stringify(body)); };
  const parts = decodeURIComponent(new URL(req.url, 'http://x').pathname).split('/').filter(Boolean);
  if (req.method === 'GET' && parts[0] === 'stats') return send(200, stats);
  if (req.method === 'GET' && parts[0] === 'messages') return send(200, journal);
  if (req.method === 'PUT' && parts[0] === 'queues' && parts.length === 2) { createQueue(parts[1]); return send(201, {}); }
  if (req.method === 'PUT' && parts[0] === 'topics' && parts.length === 4 && parts[2] === 'subscriptions') {
    createSubscription(parts[1], parts[3]);
    return send(201, {});
  }
  send(404, { error: 'unknown control request' });
}

for (const q of opts.queues) createQueue(q);
for (const [t, subs] of opts.topics) { createSubscription(t); for (const s of subs) createSubscription(t, s); }

const listenOptions = { port: opts.port, host: opts.host };
if (opts.tlsCert) {
  Object.assign(listenOptions, { transport: 'tls', cert: fs.readFileSync(opts.tlsCert), key: fs.readFileSync(opts.tlsKey) });
}
const amqpServer = container.listen(listenOptions);
amqpServer.on('listening', () => {
  const httpServer = http.createServer(control).listen(opts.httpPort, opts.host, () => {
    log('listening', { port: amqpServer.address().port, httpPort: httpServer.address().port });
  });
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
