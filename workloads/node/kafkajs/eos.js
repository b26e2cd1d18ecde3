'use strict'
/*
 * An eos processor of the harness's client contract (docs/client-contract.md) on KafkaJS.
 *
 * The loop (contract.js) is KafkaJS's documented consume-transform-produce: a consumer with
 * autoCommit off runs eachBatch; each chunk of at most txn_size records is one transaction of a
 * transactional producer: send the outputs, sendOffsets({consumerGroupId, topics}), commit.
 * KafkaJS's sendOffsets takes the group id only: no member id and no generation go into
 * TxnOffsetCommit, so the coordinator cannot fence a member that was rebalanced away (KIP-447).
 * That is what this client is here to be judged on.
 *
 * What it implements of the contract: variants eos and read-uncommitted (broken on purpose: it
 * reads aborted data), the classic protocol, deliberate aborts, the zombie signal, hook points
 * and arm-file moments. KafkaJS does not tell the generation: it records -1 ("unknown"), as the
 * history format allows.
 */
const { Kafka, logLevel } = require('kafkajs')
const fs = require('fs')
const { EXIT, FENCED, refusal, runProcessor } = require('./contract')

/** KafkaJS's connection settings for the contract's security object (null: plaintext): TLS
 * checked against the cluster's CA, with the client's certificate (SSL) or a SCRAM-SHA-512
 * login whose password is read now (a successor after a rotation reads the new one). */
function security (sec) {
  if (!sec) return {}
  const ssl = { ca: [fs.readFileSync(sec.ca)] }
  if (sec.protocol === 'SSL') return { ssl: { ...ssl, cert: fs.readFileSync(sec.certificate), key: fs.readFileSync(sec.key) } }
  if (sec.mechanism !== 'SCRAM-SHA-512') throw new Error(`security.mechanism "${sec.mechanism}": only SCRAM-SHA-512`)
  return { ssl, sasl: { mechanism: 'scram-sha-512', username: sec.username, password: fs.readFileSync(sec.password_file, 'utf8').trim() } }
}

const LEVELS = { debug: logLevel.DEBUG, info: logLevel.INFO, warn: logLevel.WARN, error: logLevel.ERROR }

const library = {
  name: 'kafkajs',
  title: 'KafkaJS',
  script: 'eos.js',
  version: require('kafkajs/package.json').version,
  variants: ['eos', 'read-uncommitted'],
  groupProtocols: ['classic'],
  runOptions: { autoCommit: false },
  sendOptions: { acks: -1 },

  clientConfigProblem (settings) {
    for (const [k, v] of Object.entries(settings)) {
      if (k !== 'log.level') return `"${k}": not a setting of KafkaJS's processor (it takes: log.level)`
      if (!(v in LEVELS)) return `log.level "${v}": one of debug, info, warn, error`
    }
    return null
  },

  async connect (p) {
    const cfg = p.cfg
    const kafka = new Kafka({ clientId: `eos-${cfg.instance}`, brokers: cfg.bootstrap.split(','), logLevel: LEVELS[(cfg.client_config || {})['log.level'] || 'warn'], connectionTimeout: 3000, requestTimeout: 10000, ...security(cfg.security) })
    p.producer = kafka.producer({ transactionalId: p.tid, idempotent: true, maxInFlightRequests: 1, transactionTimeout: cfg.transaction_timeout_ms })
    p.consumer = kafka.consumer({ groupId: cfg.group_id, sessionTimeout: cfg.session_timeout_ms, heartbeatInterval: Math.max(100, Math.floor(cfg.session_timeout_ms / 10)), readUncommitted: cfg.variant === 'read-uncommitted', maxWaitTimeInMs: cfg.commit_interval_ms })
    p.admin = kafka.admin()
    await Promise.all([p.producer.connect(), p.consumer.connect(), p.admin.connect()])
    // KafkaJS asks for the transactional producer id lazily, at the first transaction(); the
    // contract's start is the moment the producer holds its transactional id. An empty
    // transaction asks for it now (its abort sends nothing: no partition was added).
    await (await p.producer.transaction()).abort()
    const ev = p.consumer.events
    p.consumer.on(ev.GROUP_JOIN, e => {
      p.memberId = e.payload.memberId || ''
      const parts = []
      for (const [topic, ps] of Object.entries(e.payload.memberAssignment || {})) for (const n of [...ps].sort((a, b) => a - b)) parts.push([topic, n])
      p.assigned = parts
      p.rebalance('assign', parts)
    })
    // KafkaJS has no revoke callback: an eager rebalance takes every partition away.
    p.consumer.on(ev.REBALANCING, () => { p.rebalance('revoke', p.assigned); p.assigned = [] })
    p.consumer.on(ev.CRASH, e => {
      if (e.payload.restart) return
      const refused = refusal(library.errInfo(e.payload.error, 'poll'))
      p.finish(refused ? refused.code : EXIT.FATAL, refused ? refused.reason : 'fatal')
    })
    await p.consumer.subscribe({ topics: [cfg.input_topic], fromBeginning: true })
  },

  sendOffsets (p, txn, topic, partition, next) {
    return txn.sendOffsets({ consumerGroupId: p.cfg.group_id, topics: [{ topic, partitions: [{ partition, offset: String(next) }] }] })
  },

  errInfo (e, stage) {
    let code = e && e.type ? e.type : (e && e.name) || 'CLIENT_ERROR'
    if (e && e.name === 'KafkaJSNonRetriableError' && e.cause && e.cause.type) code = e.cause.type
    // KafkaJS names a refused login by its class, not by Kafka's error.
    if ([e && e.name, e && e.cause && e.cause.name].includes('KafkaJSSASLAuthenticationError')) code = 'SASL_AUTHENTICATION_FAILED'
    const fenced = FENCED.has(code)
    return { stage, code, message: String((e && e.message) || e), fatal: fenced, abortable: !fenced, retriable: Boolean(e && e.retriable) }
  },

  /** The group's committed offsets through the admin client; no offset: the low watermark. */
  async committed (p, topic) {
    const fetched = await p.admin.fetchOffsets({ groupId: p.cfg.group_id, topics: [topic] })
    const low = await p.admin.fetchTopicOffsets(topic)
    const committed = new Map()
    for (const t of fetched) for (const x of t.partitions) committed.set(x.partition, Number(x.offset))
    const start = n => { const lw = low.find(x => x.partition === n); return lw ? Number(lw.low) : 0 }
    return { committed, start }
  },
}

runProcessor(library)
