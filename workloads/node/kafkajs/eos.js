'use strict'
/*
 * An eos processor of the harness's client contract (docs/client-contract.md) on KafkaJS.
 *
 * The loop is KafkaJS's documented consume-transform-produce: a consumer with autoCommit off
 * runs eachBatch; each chunk of at most txn_size records is one transaction of a
 * transactional producer: send the outputs, sendOffsets({consumerGroupId, topics}), commit.
 * KafkaJS's sendOffsets takes the group id only: no member id and no generation go into
 * TxnOffsetCommit, so the coordinator cannot fence a member that was rebalanced away (KIP-447).
 * That is what this client is here to be judged on.
 *
 * What it implements of the contract: variants eos and read-uncommitted (broken on purpose: it
 * reads aborted data), the classic protocol, deliberate aborts,
 * the zombie signal, hook points and arm-file moments. KafkaJS does not tell the generation:
 * it records -1 ("unknown"), as the history format allows.
 */
const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const EXIT = { OK: 0, BAD_CONFIG: 2, FENCED: 3, FATAL: 4, UNCERTAIN: 5, REWIND_FAILED: 6, ORPHANED: 7, HOOK: 70 }
const FIELDS = {
  instance: null, slot: null, bootstrap: null, input_topic: null, output_topic: null,
  output_partitions: null, group_id: null, history_path: null, txn_id_prefix: 'eos',
  variant: 'eos', txn_id_strategy: 'unique', txn_size: 50, commit_interval_ms: 200,
  abort_probability: 0, seed: 0, transaction_timeout_ms: 10000, session_timeout_ms: 10000,
  group_protocol: 'classic', client_config: {}, txn_delay_ms: 0, call_timeout_s: 30,
  record_history: true, hook: null, meta: {},
}
const REQUIRED = ['instance', 'slot', 'bootstrap', 'input_topic', 'output_topic', 'output_partitions', 'group_id', 'history_path']
const CLIENT = 'kafkajs'
const KAFKAJS_VERSION = require('kafkajs/package.json').version

function refuse (why) {
  process.stderr.write(`error: ${why}\n`)
  process.exit(EXIT.BAD_CONFIG)
}

function parseConfig (argv) {
  if (argv.length !== 2 || argv[0] !== '--config') refuse('usage: eos.js --config JSON')
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
  if (!['eos', 'read-uncommitted'].includes(cfg.variant)) refuse(`variant "${cfg.variant}": KafkaJS's processor implements only eos and read-uncommitted`)
  if (cfg.group_protocol !== 'classic') refuse(`group_protocol "${cfg.group_protocol}": KafkaJS runs only the classic protocol`)
  if (!['unique', 'static'].includes(cfg.txn_id_strategy)) refuse(`txn_id_strategy "${cfg.txn_id_strategy}": must be unique or static`)
  if (!(cfg.output_partitions >= 1)) refuse('output_partitions must be at least 1')
  if (!(cfg.txn_size >= 1)) refuse('txn_size must be at least 1')
  for (const k of Object.keys(cfg.client_config || {})) {
    if (k !== 'log.level') refuse(`client_config "${k}": not a setting of KafkaJS's processor (it takes: log.level)`)
  }
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
    const line = JSON.stringify(header) + '\n'
    this.fd = fs.openSync(path, 'ax')
    fs.writeSync(this.fd, line)
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

// --- errors ---------------------------------------------------------------------------------

const FENCED = new Set(['PRODUCER_FENCED', 'INVALID_PRODUCER_EPOCH', 'TRANSACTIONAL_ID_NOT_FOUND'])

function errInfo (e, stage) {
  let code = e && e.type ? e.type : (e && e.name) || 'CLIENT_ERROR'
  if (e && e.name === 'KafkaJSNonRetriableError' && e.cause && e.cause.type) code = e.cause.type
  const fenced = FENCED.has(code)
  return { stage, code, message: String((e && e.message) || e), fatal: fenced, abortable: !fenced, retriable: Boolean(e && e.retriable) }
}

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

class Processor {
  constructor (cfg) {
    this.cfg = cfg
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
      workload: 'eos', role: 'processor', instance: cfg.instance, slot: cfg.slot, variant: cfg.variant, transactional_id: this.tid, client: CLIENT, config: cfg.raw,
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
    const levels = { debug: logLevel.DEBUG, info: logLevel.INFO, warn: logLevel.WARN, error: logLevel.ERROR }
    const level = (cfg.client_config || {})['log.level']
    if (level !== undefined && !(level in levels)) refuse(`client_config log.level "${level}": one of debug, info, warn, error`)
    this.kafka = new Kafka({ clientId: `eos-${cfg.instance}`, brokers: cfg.bootstrap.split(','), logLevel: levels[level || 'warn'], connectionTimeout: 3000, requestTimeout: 10000 })
    this.producer = this.kafka.producer({ transactionalId: this.tid, idempotent: true, maxInFlightRequests: 1, transactionTimeout: cfg.transaction_timeout_ms })
    this.consumer = this.kafka.consumer({ groupId: cfg.group_id, sessionTimeout: cfg.session_timeout_ms, heartbeatInterval: Math.max(100, Math.floor(cfg.session_timeout_ms / 10)), readUncommitted: cfg.variant === 'read-uncommitted', maxWaitTimeInMs: cfg.commit_interval_ms })
    this.admin = this.kafka.admin()
    try {
      await withTimeout(Promise.all([this.producer.connect(), this.consumer.connect(), this.admin.connect()]), this.callMs, 'connect')
    } catch (e) {
      this.rec.fail('start', value, errInfo(e, 'init'))
      throw new Exit(FENCED.has(errInfo(e, 'init').code) ? EXIT.FENCED : EXIT.FATAL, 'init-failed')
    }
    const ev = this.consumer.events
    this.consumer.on(ev.GROUP_JOIN, e => {
      this.memberId = e.payload.memberId || ''
      const parts = []
      for (const [topic, ps] of Object.entries(e.payload.memberAssignment || {})) for (const p of [...ps].sort((a, b) => a - b)) parts.push([topic, p])
      this.assigned = parts
      this.rebalance('assign', parts)
    })
    // KafkaJS has no revoke callback: an eager rebalance takes every partition away.
    this.consumer.on(ev.REBALANCING, () => { this.rebalance('revoke', this.assigned); this.assigned = [] })
    this.consumer.on(ev.CRASH, e => {
      if (!e.payload.restart) this.finish(EXIT.FATAL, 'fatal')
    })
    await this.consumer.subscribe({ topics: [cfg.input_topic], fromBeginning: true })
    this.rec.ok('start', { ...value, client: CLIENT, client_version: KAFKAJS_VERSION })
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
      autoCommit: false,
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
    })
  }

  async transaction (topic, partition, chunk) {
    const cfg = this.cfg
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
      const info = errInfo(e, 'begin')
      this.rec.fail('txn', result, info)
      throw new Exit(FENCED.has(info.code) ? EXIT.FENCED : EXIT.FATAL, FENCED.has(info.code) ? 'fenced' : 'fatal')
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
      const sent = txn.send({ topic: cfg.output_topic, messages, acks: -1 })
      sent.catch(() => {}) // judged below, after the hook point
      this.hook('after-produce')
      stage = 'flush'
      const md = await withTimeout(sent, this.callMs, 'flush')
      const base = md.find(r => r.partition === outPartition)
      if (base && base.baseOffset !== undefined) outputs.forEach((o, i) => { o[0] = outPartition; o[1] = Number(base.baseOffset) + i })
      this.hook('after-flush')
      const next = Number(chunk[chunk.length - 1].offset) + 1
      result.offsets = [[partition, next]]
      if (cfg.abort_probability > 0 && this.rng() < cfg.abort_probability) {
        throw Object.assign(new Error('aborted on purpose (abort probability)'), { type: 'DELIBERATE_ABORT', deliberate: true })
      }
      stage = 'send-offsets'
      await this.txnDelay()
      this.hook('before-offsets')
      await withTimeout(txn.sendOffsets({ consumerGroupId: cfg.group_id, topics: [{ topic, partitions: [{ partition, offset: String(next) }] }] }), this.callMs, 'send-offsets')
      stage = 'commit'
      await this.txnDelay()
      this.hook('before-commit')
      await withTimeout(txn.commit(), this.callMs, 'commit')
      this.hook('after-commit')
    } catch (e) {
      if (e instanceof Exit) throw e
      const info = errInfo(e, e.deliberate ? 'deliberate-abort' : stage)
      return this.failedTxn(txn, topic, result, info)
    }
    this.committed++
    this.rec.ok('txn', result)
    return true
  }

  /** The Java and Python processors' rules: info when a commit may have happened, exit when
   * fenced, else abort and rewind to the group's committed offsets. */
  async failedTxn (txn, topic, result, info) {
    this.failed++
    const fenced = FENCED.has(info.code)
    if (info.stage === 'commit' && !info.deliberate) {
      this.rec.info('txn', result, info)
      throw new Exit(fenced ? EXIT.FENCED : EXIT.UNCERTAIN, 'uncertain')
    }
    if (fenced) {
      this.rec.fail('txn', result, info)
      throw new Exit(EXIT.FENCED, 'fenced')
    }
    try {
      await withTimeout(txn.abort(), this.callMs, 'abort')
    } catch (e) {
      const abortInfo = errInfo(e, 'abort')
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
      const committed = await withTimeout(this.admin.fetchOffsets({ groupId: this.cfg.group_id, topics: [topic] }), this.callMs, 'rewind')
      const low = await withTimeout(this.admin.fetchTopicOffsets(topic), this.callMs, 'rewind')
      const byPart = new Map()
      for (const t of committed) for (const p of t.partitions) byPart.set(p.partition, Number(p.offset))
      for (const [, p] of parts) {
        let off = byPart.has(p) ? byPart.get(p) : -1
        if (off < 0) {
          const lw = low.find(x => x.partition === p)
          off = lw ? Number(lw.low) : 0
          pairs.push([p, -1001])
        } else {
          pairs.push([p, off])
        }
        this.consumer.seek({ topic, partition: p, offset: String(off) })
      }
    } catch (e) {
      this.rec.fail('rewind', { partitions: parts }, errInfo(e, 'rewind'))
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

function main () {
  const cfg = parseConfig(process.argv.slice(2))
  let p
  try {
    p = new Processor(cfg)
  } catch (e) {
    refuse(`cannot start: ${e.message}`)
  }
  p.run().catch(e => {
    p.warn(`loop failed: ${e.stack || e}`)
    p.finish(EXIT.FATAL, 'fatal')
  })
}

main()
