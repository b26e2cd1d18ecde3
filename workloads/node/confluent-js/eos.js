'use strict'
/*
 * An eos processor of the harness's client contract (docs/client-contract.md) on Confluent's
 * JavaScript client (@confluentinc/kafka-javascript), through its KafkaJS-shaped API.
 *
 * The loop is the one of contract.js, as on KafkaJS: eachBatch, a transaction per chunk, send,
 * sendOffsets, commit. The difference that matters: this library runs librdkafka underneath,
 * and its sendOffsets takes the consumer itself (not a group id), so the offset commit carries
 * the consumer's group metadata (member id, generation) as KIP-447 asks, and librdkafka's
 * consumer does the group work: rebalances, the OffsetFetch of a new assignment (with
 * require_stable, waiting on pending transactional offsets), and the start of a partition with
 * no committed offset. It is here to show whether librdkafka's findings (F2, F5) reach a
 * JavaScript user.
 *
 * What it implements of the contract: variants eos and read-uncommitted (broken on purpose),
 * the classic and consumer (KIP-848) group protocols, deliberate aborts, the zombie signal, hook
 * points and arm-file moments; client_config takes librdkafka settings. The binding tells
 * neither the member id nor the generation: it records -1 ("unknown").
 */
const { KafkaJS, librdkafkaVersion } = require('@confluentinc/kafka-javascript')
const fs = require('fs')
const { runProcessor } = require('./contract')

const LOG_LEVEL = KafkaJS.logLevel
/** librdkafka's error names by code (ERR__FENCED -> _FENCED, as rd_kafka_err2name says). */
const ERR_NAMES = new Map(Object.entries(KafkaJS.ErrorCodes).map(([name, code]) => [code, name.replace(/^ERR_/, '')]))
const ASSIGN = KafkaJS.ErrorCodes.ERR__ASSIGN_PARTITIONS
/** Settings the harness owns (docs/client-contract.md): the workload decides them. */
const OWNED = new Set(['bootstrap.servers', 'group.id', 'transactional.id', 'group.protocol', 'transaction.timeout.ms', 'session.timeout.ms', 'isolation.level', 'enable.auto.commit', 'enable.auto.offset.store'])

const library = {
  name: 'confluent-js',
  title: "Confluent's JavaScript client",
  script: 'eos.js',
  version: `${require('@confluentinc/kafka-javascript/package.json').version} (librdkafka ${librdkafkaVersion})`,
  variants: ['eos', 'read-uncommitted'],
  groupProtocols: ['classic', 'consumer'],

  clientConfigProblem (settings) {
    for (const k of Object.keys(settings)) {
      if (OWNED.has(k)) return `"${k}": the harness sets it`
    }
    return null
  },

  async connect (p) {
    const cfg = p.cfg
    const settings = { ...security(cfg.security), ...(cfg.client_config || {}) }
    const kafka = new KafkaJS.Kafka({ kafkaJS: { clientId: `eos-${cfg.instance}`, brokers: cfg.bootstrap.split(','), logLevel: LOG_LEVEL.WARN } })
    p.producer = kafka.producer({
      kafkaJS: { transactionalId: p.tid, idempotent: true, transactionTimeout: cfg.transaction_timeout_ms },
      acks: -1,
      'linger.ms': 5,
      ...settings,
    })
    const classic = cfg.group_protocol === 'classic'
    p.consumer = kafka.consumer({
      kafkaJS: { groupId: cfg.group_id, fromBeginning: true, autoCommit: false },
      'group.protocol': cfg.group_protocol,
      'isolation.level': cfg.variant === 'read-uncommitted' ? 'read_uncommitted' : 'read_committed',
      ...(classic ? { 'session.timeout.ms': cfg.session_timeout_ms, 'heartbeat.interval.ms': Math.max(100, Math.min(3000, Math.floor(cfg.session_timeout_ms / 3))), 'max.poll.interval.ms': Math.max(60000, cfg.session_timeout_ms) } : {}),
      // librdkafka's own callback events: assign and revoke (a lost assignment is a revoke
      // whose assignmentLost() is true); the library applies the assignment after it.
      rebalance_cb: (err, assignment, fns) => {
        const parts = assignment.map(tp => [tp.topic, tp.partition]).sort((a, b) => a[1] - b[1])
        if (err.code === ASSIGN) {
          p.assigned = [...p.assigned.filter(([t, n]) => !parts.some(([u, m]) => u === t && m === n)), ...parts]
          p.rebalance('assign', parts)
        } else {
          p.assigned = p.assigned.filter(([t, n]) => !parts.some(([u, m]) => u === t && m === n))
          p.rebalance(fns.assignmentLost() ? 'lost' : 'revoke', parts)
        }
      },
      ...settings,
    })
    p.admin = null
    await Promise.all([p.producer.connect(), p.consumer.connect()])
    await p.consumer.subscribe({ topics: [cfg.input_topic] })
  },

  sendOffsets (p, txn, topic, partition, next) {
    return txn.sendOffsets({ consumer: p.consumer, topics: [{ topic, partitions: [{ partition, offset: String(next) }] }] })
  },

  errInfo (e, stage) {
    const code = e && typeof e.code === 'number' && ERR_NAMES.has(e.code) ? ERR_NAMES.get(e.code) : (e && e.type) || (e && e.name) || 'CLIENT_ERROR'
    return { stage, code, message: String((e && e.message) || e), fatal: Boolean(e && e.fatal), abortable: Boolean(e && e.abortable), retriable: Boolean(e && e.retriable) }
  },

  /** The group's committed offsets as the consumer reads them (librdkafka asks for stable
   * offsets under read_committed); no offset: the beginning (-2). */
  async committed (p, topic, partitions) {
    const got = await p.consumer.committed(partitions.map(partition => ({ topic, partition })), p.callMs)
    const committed = new Map()
    for (const x of got) if (x.topic === topic) committed.set(x.partition, Number(x.offset))
    return { committed, start: () => -2 }
  },
}

/** librdkafka's settings for the contract's security object (null: plaintext), the password
 * read now (a successor after a rotation reads the new one). */
function security (sec) {
  if (!sec) return {}
  const out = { 'security.protocol': sec.protocol.toLowerCase(), 'ssl.ca.location': sec.ca }
  if (sec.protocol === 'SSL') return { ...out, 'ssl.certificate.location': sec.certificate, 'ssl.key.location': sec.key }
  return { ...out, 'sasl.mechanisms': sec.mechanism, 'sasl.username': sec.username, 'sasl.password': fs.readFileSync(sec.password_file, 'utf8').trim() }
}

runProcessor(library)
