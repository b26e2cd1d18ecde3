'use strict'
/*
 * The library-independent half of the harness's eos processors on Node.js: the client contract
 * (docs/client-contract.md) once, for every KafkaJS-shaped library.
 *
 * Why one module: KafkaJS and Confluent's JavaScript client share KafkaJS's API (eachBatch, a
 * transaction object, sendOffsets, commit), so the loop, the history, the arm file, the hook
 * points, the exit codes and the rules for a failed transaction are the same; what differs is
 * how each library is configured, how it tells a rebalance, what sendOffsets takes, how it names
 * an error and how it reads the group's committed offsets. A processor is this module's
 * `Processor` plus a `library` object with those (see `runProcessor`). The build copies this
 * file beside the processor's own (`[build] shared` of its manifest).
 */
const fs = require('fs')

const EXIT = { OK: 0, BAD_CONFIG: 2, FENCED: 3, FATAL: 4, UNCERTAIN: 5, REWIND_FAILED: 6, ORPHANED: 7, NOT_AUTHORIZED: 8, HOOK: 70 }
const FIELDS = {
  instance: null, slot: null, bootstrap: null, input_topic: null, output_topic: null,
  output_partitions: null, group_id: null, history_path: null, txn_id_prefix: 'eos',
  variant: 'eos', txn_id_strategy: 'unique', txn_size: 50, commit_interval_ms: 200,
  abort_probability: 0, seed: 0, transaction_timeout_ms: 10000, session_timeout_ms: 10000,
  group_protocol: 'classic', client_config: {}, txn_delay_ms: 0, call_timeout_s: 30,
  record_history: true, hook: null, meta: {}, security: null,
}
const REQUIRED = ['instance', 'slot', 'bootstrap', 'input_topic', 'output_topic', 'output_partitions', 'group_id', 'history_path']
const FENCED = new Set(['PRODUCER_FENCED', 'INVALID_PRODUCER_EPOCH', 'TRANSACTIONAL_ID_NOT_FOUND', '_FENCED'])
/** A login the cluster refused: Kafka's error, and librdkafka's own for it. */
const AUTHENTICATION_FAILED = new Set(['SASL_AUTHENTICATION_FAILED', '_AUTHENTICATION'])

/** The contract's exit for a client the cluster refused (an operation for want of an ACL, or
 * its login, as after a rotated password): retrying here cannot help; a successor may. */
function refusal (info) {
  const code = String(info.code || '')
  if (code.endsWith('_AUTHORIZATION_FAILED') || AUTHENTICATION_FAILED.has(code)) return new Exit(EXIT.NOT_AUTHORIZED, `not-authorized ${code}`)
  return null
}

function refuse (why) {
  process.stderr.write(`error: ${why}\n`)
  process.exit(EXIT.BAD_CONFIG)
}

/** The config of `--config JSON`, checked against the contract and the library's abilities. */
function parseConfig (argv, library) {
  if (argv.length !== 2 || argv[0] !== '--config') refuse(`usage: ${library.script} --config JSON`)
  let raw
  try {
    raw = JSON.parse(argv[1])
  } catch (e) {
    refuse(`bad --config: ${e.message}`)
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) refuse('bad --config: not an object')
  for (const k of Object.keys(raw)) if (!(k in FIELDS)) refuse(`bad --config: unknown field "${k}"`)
  for (const k of REQUIRED) if (raw[k] === undefined || raw[k] === null || raw[k] === '') refuse(`${REQUIRED.join(', ')} are required`)
  const cfg = { ...FIELDS, ...raw, raw }
  if (!library.variants.includes(cfg.variant)) refuse(`variant "${cfg.variant}": ${library.title}'s processor implements only ${library.variants.join(' and ')}`)
  if (!library.groupProtocols.includes(cfg.group_protocol)) refuse(`group_protocol "${cfg.group_protocol}": ${library.title} runs only ${library.groupProtocols.join(' and ')}`)
  if (!['unique', 'static'].includes(cfg.txn_id_strategy)) refuse(`txn_id_strategy "${cfg.txn_id_strategy}": must be unique or static`)
  if (!(cfg.output_partitions >= 1)) refuse('output_partitions must be at least 1')
  if (!(cfg.txn_size >= 1)) refuse('txn_size must be at least 1')
  const problem = library.clientConfigProblem(cfg.client_config || {})
  if (problem) refuse(`client_config ${problem}`)
  return cfg
}

// --- history ------------------------------------------------------------------------------

/** CLOCK_MONOTONIC in ns (libuv's hrtime), the clock of Python's time.monotonic_ns(). */
const monotonicNs = () => Number(process.hrtime.bigint())
const wallNow = () => new Date().toISOString().replace('Z', '000Z')
const readTrimmed = p => { try { return fs.readFileSync(p, 'utf8').trim() || null } catch (e) { return null } }

/** One process's history, format v1: header, then one op per line, one write(2) each. */
class History {
  constructor (path, proc, meta) {
    this.proc = proc
    this.index = 0
    this.fd = null
    if (!path) return
    const header = {
      history_format: 1, kind: 'process', process: proc, meta,
      clock: { time: 'monotonic_ns', boot_id: readTrimmed('/proc/sys/kernel/random/boot_id'), host: readTrimmed('/proc/sys/kernel/hostname') || 'localhost', pid: process.pid, started_wall: wallNow() },
    }
    this.fd = fs.openSync(path, 'ax')
    fs.writeSync(this.fd, JSON.stringify(header) + '\n')
  }

  record (type, f, value, error) {
    const op = { index: this.index, time: monotonicNs(), wall: wallNow(), process: this.proc, type, f, value }
    if (error) op.error = error
    if (this.fd !== null) fs.writeSync(this.fd, JSON.stringify(op) + '\n')
    this.index++
  }

  invoke (f, v) { this.record('invoke', f, v) }
  ok (f, v) { this.record('ok', f, v) }
  fail (f, v, e) { this.record('fail', f, v, e) }
  info (f, v, e) { this.record('info', f, v, e) }
  close () { if (this.fd !== null) fs.closeSync(this.fd); this.fd = null }
}

// --- the arm file ---------------------------------------------------------------------------

class ArmFile {
  constructor (history) { this.path = history + '.arm'; this.fired = history + '.fired'; this.ident = ''; this.armed = null }

  refresh () {
    let st
    try { st = fs.statSync(this.path, { bigint: true }) } catch (e) { return }
    const ident = `${st.ino}:${st.size}:${st.mtimeNs}`
    if (ident === this.ident) return
    this.ident = ident
    let text
    try { text = fs.readFileSync(this.path, 'utf8') } catch (e) { return }
    if (!text) { this.armed = null; return }
    try { this.armed = JSON.parse(text) } catch (e) { /* half-written: the next look reads it */ }
  }

  take (point) {
    if (!this.armed) return null
    const at = this.armed.at
    if (at !== point && !(at === 'during-commit' && point === 'before-commit')) return null
    const m = this.armed
    this.armed = null
    return m
  }

  writeFired (v) {
    const tmp = this.fired + '.tmp'
    fs.writeFileSync(tmp, JSON.stringify(v))
    fs.renameSync(tmp, this.fired)
  }
}

// --- helpers --------------------------------------------------------------------------------

class Exit extends Error {
  constructor (code, reason) { super(reason); this.code = code; this.reason = reason }
}

/** A small seeded generator (mulberry32): the deliberate aborts and pauses replay per seed. */
function seeded (seed) {
  let a = (seed >>> 0) || 0x9e3779b9
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

function withTimeout (promise, ms, stage) {
  let timer
  const timeout = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`${stage} did not complete within ${ms} ms`), { type: '_TIMED_OUT' })), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

// --- the processor --------------------------------------------------------------------------

/**
 * The consume-transform-produce loop and the contract around it. `library` gives:
 * `name`, `title`, `script`, `variants`, `groupProtocols`, `clientConfigProblem(settings)`,
 * `version`, `connect(processor)` (sets `producer`, `consumer`, `admin`, reports rebalances
 * through `processor.rebalance`, subscribes), `sendOffsets(processor, txn, topic, partition,
 * next)`, `errInfo(e, stage)` and `committed(processor, topic, partitions)` (a Map partition ->
 * committed offset, -1 for none, and where a partition without one starts).
 */
class Processor {
  constructor (cfg, library) {
    this.cfg = cfg
    this.lib = library
    this.tid = cfg.txn_id_strategy === 'static' ? `${cfg.txn_id_prefix}-slot-${cfg.slot}` : `${cfg.txn_id_prefix}-p${cfg.instance}`
    this.arm = new ArmFile(cfg.history_path)
    this.rng = seeded(cfg.seed)
    this.delayRng = seeded(cfg.seed ^ 0x5eed)
    this.parent = process.ppid
    this.callMs = cfg.call_timeout_s * 1000
    this.stopping = null
    this.zombie = false
    this.hookFired = false
    this.seq = 0
    this.committed = 0
    this.failed = 0
    this.memberId = ''
    this.assigned = []
    this.inTxn = 0
    this.pending = []
    this.finished = false
    this.rec = new History(cfg.record_history === false ? null : cfg.history_path, cfg.instance, {
      workload: 'eos', role: 'processor', instance: cfg.instance, slot: cfg.slot, variant: cfg.variant, transactional_id: this.tid, client: library.name, config: cfg.raw,
    })
  }

  warn (msg) { process.stderr.write(`${new Date().toISOString()} instance ${this.cfg.instance}: ${msg}\n`) }

  /** A group event; one during a transaction is recorded right after its completion. */
  rebalance (event, partitions) {
    const ok = { event, partitions, generation: -1, member_id: this.memberId }
    if (this.inTxn) {
      this.pending.push({ ...ok, during_txn: this.inTxn, callback_time: monotonicNs() })
      return
    }
    this.rec.invoke('rebalance', { event, partitions })
    this.rec.ok('rebalance', ok)
  }

  txnEnded () {
    this.inTxn = 0
    for (const ok of this.pending) {
      this.rec.invoke('rebalance', { event: ok.event, partitions: ok.partitions })
      this.rec.ok('rebalance', ok)
    }
    this.pending = []
  }

  installSignals () {
    process.on('SIGTERM', () => { this.stopping = this.stopping || 'sigterm' })
    process.on('SIGINT', () => { this.stopping = this.stopping || 'sigint' })
    process.on('SIGUSR1', () => { this.zombie = true })
    process.on('SIGUSR2', () => this.arm.refresh())
  }

  /** The hook points: an armed moment, the zombie, the test hook. Throws an armed abort. */
  hook (point) {
    this.arm.refresh()
    const m = this.arm.take(point)
    if (m) {
      this.arm.writeFired({ at: m.at, action: m.action, txn: this.seq, pid: process.pid })
      this.warn(`armed ${m.action} at ${m.at} of txn ${this.seq}`)
      if (m.action === 'abort') {
        throw Object.assign(new Error(`an abortable failure armed at ${m.at}`), { type: 'INJECTED_ABORT', deliberate: true })
      }
      const sig = m.action === 'kill' ? 'SIGKILL' : 'SIGSTOP'
      if (m.at === 'during-commit') setTimeout(() => process.kill(process.pid, sig), m.delay_ms || 0)
      else process.kill(process.pid, sig)
    }
    if ((point === 'before-offsets' || point === 'before-commit') && this.zombie) {
      this.zombie = false
      this.warn('pausing itself before offsets (zombie)')
      process.kill(process.pid, 'SIGSTOP')
      return
    }
    const h = this.cfg.hook
    if (!h || this.hookFired || h.at !== point || this.seq < (h.txn || 1)) return
    this.hookFired = true
    this.warn(`hook ${h.action} at ${point} of txn ${this.seq}`)
    if (h.action === 'kill') process.kill(process.pid, 'SIGKILL')
    else if (h.action === 'stop') process.kill(process.pid, 'SIGSTOP')
    else process.exit(EXIT.HOOK)
  }

  async txnDelay () {
    if (this.cfg.txn_delay_ms > 0) await sleep(Math.floor(this.delayRng() * (this.cfg.txn_delay_ms + 1)))
  }

  async start () {
    const cfg = this.cfg
    const value = {
      instance: cfg.instance, slot: cfg.slot, pid: process.pid, variant: cfg.variant, transactional_id: this.tid,
      group_id: cfg.group_id, input_topic: cfg.input_topic, output_topic: cfg.output_topic,
      group_protocol: cfg.group_protocol, client_config: cfg.client_config || {}, txn_delay_ms: cfg.txn_delay_ms,
    }
    this.rec.invoke('start', value)
    try {
      await withTimeout(this.lib.connect(this), this.callMs, 'connect')
    } catch (e) {
      const info = this.lib.errInfo(e, 'init')
      this.rec.fail('start', value, info)
      throw refusal(info) || new Exit(FENCED.has(info.code) ? EXIT.FENCED : EXIT.FATAL, 'init-failed')
    }
    this.rec.ok('start', { ...value, client: this.lib.name, client_version: this.lib.version })
  }

  async run () {
    this.installSignals()
    try {
      await this.start()
    } catch (e) {
      if (e instanceof Exit) return this.finish(e.code, e.reason)
      this.warn(`cannot start: ${e.stack || e}`)
      return this.finish(EXIT.FATAL, 'fatal')
    }
    setInterval(() => {
      if (process.ppid !== this.parent) this.stopping = this.stopping || 'orphaned'
      if (this.stopping && !this.inTxn) this.finish(this.stopping === 'orphaned' ? EXIT.ORPHANED : EXIT.OK, this.stopping)
    }, 100)
    await this.consumer.run({
      eachBatchAutoResolve: false,
      eachBatch: async ({ batch, resolveOffset, isRunning, isStale }) => {
        for (let i = 0; i < batch.messages.length; i += this.cfg.txn_size) {
          if (this.stopping || this.finished || !isRunning() || isStale()) return
          const chunk = batch.messages.slice(i, i + this.cfg.txn_size)
          let done
          try {
            done = await this.transaction(batch.topic, batch.partition, chunk)
          } catch (e) {
            if (e instanceof Exit) return this.finish(e.code, e.reason)
            throw e
          }
          if (!done) return // aborted and rewound: the rest of this batch comes again
          resolveOffset(chunk[chunk.length - 1].offset)
        }
      },
      ...(this.lib.runOptions || {}),
    })
  }

  async transaction (topic, partition, chunk) {
    const seq = ++this.seq
    this.inTxn = seq
    const inputs = chunk.map(m => [partition, Number(m.offset), m.value ? m.value.toString() : ''])
    const outputs = chunk.map(m => [null, null, null, partition, Number(m.offset)])
    this.rec.invoke('txn', { txn: seq, transactional_id: this.tid, generation: -1, member_id: this.memberId, inputs })
    const result = { txn: seq, outputs, offsets: null }
    try {
      return await this.steps(topic, partition, chunk, seq, outputs, result)
    } finally {
      this.txnEnded()
    }
  }

  async steps (topic, partition, chunk, seq, outputs, result) {
    const cfg = this.cfg
    let txn
    try {
      txn = await withTimeout(this.producer.transaction(), this.callMs, 'begin')
    } catch (e) {
      this.failed++
      const info = this.lib.errInfo(e, 'begin')
      this.rec.fail('txn', result, info)
      throw refusal(info) || new Exit(FENCED.has(info.code) ? EXIT.FENCED : EXIT.FATAL, FENCED.has(info.code) ? 'fenced' : 'fatal')
    }
    let stage = 'produce'
    try {
      const outPartition = partition % cfg.output_partitions
      const messages = chunk.map((m, i) => {
        const out = 'out-' + (m.value ? m.value.toString() : '')
        outputs[i][2] = out
        return {
          key: m.value,
          value: out,
          partition: outPartition,
          headers: {
            'src-topic': topic, 'src-partition': String(partition), 'src-offset': String(m.offset),
            instance: String(cfg.instance), 'transactional-id': this.tid, generation: '-1',
            'member-id': this.memberId, 'txn-seq': String(seq),
          },
        }
      })
      const sent = txn.send({ topic: cfg.output_topic, messages, ...(this.lib.sendOptions || {}) })
      sent.catch(() => {}) // judged below, after the hook point
      this.hook('after-produce')
      stage = 'flush'
      const md = await withTimeout(sent, this.callMs, 'flush')
      const base = md.find(r => r.partition === outPartition)
      if (base && base.baseOffset !== undefined && base.baseOffset !== null) outputs.forEach((o, i) => { o[0] = outPartition; o[1] = Number(base.baseOffset) + i })
      this.hook('after-flush')
      const next = Number(chunk[chunk.length - 1].offset) + 1
      result.offsets = [[partition, next]]
      if (cfg.abort_probability > 0 && this.rng() < cfg.abort_probability) {
        throw Object.assign(new Error('aborted on purpose (abort probability)'), { type: 'DELIBERATE_ABORT', deliberate: true })
      }
      stage = 'send-offsets'
      await this.txnDelay()
      this.hook('before-offsets')
      await withTimeout(this.lib.sendOffsets(this, txn, topic, partition, next), this.callMs, 'send-offsets')
      stage = 'commit'
      await this.txnDelay()
      this.hook('before-commit')
      await withTimeout(txn.commit(), this.callMs, 'commit')
      this.hook('after-commit')
    } catch (e) {
      if (e instanceof Exit) throw e
      const info = e.deliberate ? { stage: 'deliberate-abort', code: e.type, message: e.message, fatal: false, abortable: true, retriable: false } : this.lib.errInfo(e, stage)
      return this.failedTxn(txn, topic, result, info)
    }
    this.committed++
    this.rec.ok('txn', result)
    return true
  }

  /** The Java and Python processors' rules: info when a commit may have happened, exit when
   * fenced or fatal, else abort and rewind to the group's committed offsets. */
  async failedTxn (txn, topic, result, info) {
    this.failed++
    const fenced = FENCED.has(info.code)
    if (info.stage === 'commit') {
      this.rec.info('txn', result, info)
      throw refusal(info) || new Exit(fenced ? EXIT.FENCED : EXIT.UNCERTAIN, 'uncertain')
    }
    const refused = refusal(info)
    if (refused) {
      this.rec.fail('txn', result, info)
      throw refused
    }
    if (fenced || (info.fatal && info.stage !== 'deliberate-abort')) {
      this.rec.fail('txn', result, info)
      throw new Exit(fenced ? EXIT.FENCED : EXIT.FATAL, fenced ? 'fenced' : 'fatal')
    }
    try {
      await withTimeout(txn.abort(), this.callMs, 'abort')
    } catch (e) {
      const abortInfo = this.lib.errInfo(e, 'abort')
      this.rec.fail('txn', result, { ...info, abort_error: abortInfo })
      const abortFenced = FENCED.has(abortInfo.code)
      throw new Exit(abortFenced ? EXIT.FENCED : EXIT.FATAL, abortFenced ? 'fenced' : 'fatal')
    }
    this.rec.fail('txn', result, info)
    await this.rewind(topic)
    return false
  }

  async rewind (topic) {
    const parts = this.assigned.filter(([t]) => t === topic)
    this.rec.invoke('rewind', { partitions: parts })
    const pairs = []
    try {
      const { committed, start } = await withTimeout(this.lib.committed(this, topic, parts.map(([, p]) => p)), this.callMs, 'rewind')
      for (const [, p] of parts) {
        const off = committed.has(p) ? committed.get(p) : -1
        pairs.push([p, off < 0 ? -1001 : off])
        this.consumer.seek({ topic, partition: p, offset: String(off < 0 ? start(p) : off) })
      }
    } catch (e) {
      this.rec.fail('rewind', { partitions: parts }, this.lib.errInfo(e, 'rewind'))
      throw new Exit(EXIT.REWIND_FAILED, 'rewind-failed')
    }
    this.rec.ok('rewind', { partitions: parts, offsets: pairs })
  }

  async finish (code, reason) {
    if (this.finished) return
    this.finished = true
    const closing = Promise.all([this.consumer, this.producer, this.admin].filter(Boolean).map(c => c.disconnect().catch(() => {})))
    await Promise.race([closing, sleep(10000)])
    this.rec.invoke('exit', { reason })
    this.rec.ok('exit', { reason, code, txns: this.seq, committed: this.committed, failed: this.failed })
    this.rec.close()
    process.exit(code)
  }
}

/** Parse the command line, start the processor on `library`, exit by the contract's codes. */
function runProcessor (library) {
  const cfg = parseConfig(process.argv.slice(2), library)
  let p
  try {
    p = new Processor(cfg, library)
  } catch (e) {
    refuse(`cannot start: ${e.message}`)
  }
  p.run().catch(e => {
    p.warn(`loop failed: ${e.stack || e}`)
    p.finish(EXIT.FATAL, 'fatal')
  })
}

module.exports = { EXIT, FENCED, Exit, refusal, refuse, runProcessor, withTimeout }
