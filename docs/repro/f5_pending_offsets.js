'use strict'
/*
 * F5's reproduction on Confluent's JavaScript client (@confluentinc/kafka-javascript, librdkafka
 * underneath), standalone: the steps of f5_pending_offsets.py, through the library's own
 * consumer and transactional producer. It shows whether F5 reaches a JavaScript user.
 *
 * Needs only the library (`npm install @confluentinc/kafka-javascript`; or NODE_PATH set to a
 * node_modules that has it) and a running Kafka (3.7 or newer; 4.0 or newer for
 * --protocol consumer):
 *
 *     node f5_pending_offsets.js --bootstrap localhost:9092 [--protocol classic|consumer]
 *         [--tries N]
 *
 * Each try: a fresh two-partition input topic with ten records per partition; a transactional
 * producer commits offset 3 for both partitions in one transaction (KIP-447:
 * sendOffsetsToTransaction with the consumer, whose group metadata goes with the offsets), then
 * sends offset 5 for partition 0 in a second transaction it leaves open. Members B and C join
 * (read_committed). The one given partition 0 must wait (its OffsetFetch with require_stable is
 * answered UNSTABLE_OFFSET_COMMIT); the one given partition 1 reads it from 3. That one leaves:
 * the rebalance gives the waiting member partition 1 as well. Expected: it keeps waiting on
 * partition 0 until the transaction ends, then starts at 5.
 *
 * Exit status: 1 when any try reproduced it, 0 when every try waited and started at 5, 2 on a
 * setup error.
 */
const crypto = require('crypto')
const { KafkaConsumer, Producer, AdminClient, CODES, librdkafkaVersion } = require('@confluentinc/kafka-javascript')

/** Group-coordinator errors a member sees while the coordinator moves; it retries them. */
const TRANSIENT = new Set([CODES.ERRORS.ERR_NOT_COORDINATOR, CODES.ERRORS.ERR_COORDINATOR_LOAD_IN_PROGRESS, CODES.ERRORS.ERR_COORDINATOR_NOT_AVAILABLE])

function parseArgs (argv) {
  const args = { bootstrap: null, protocol: 'classic', tries: 1 }
  for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1]]
    if (v === undefined) throw new Error(`${k} needs a value`)
    if (k === '--bootstrap') args.bootstrap = v
    else if (k === '--protocol' && ['classic', 'consumer'].includes(v)) args.protocol = v
    else if (k === '--tries' && Number(v) >= 1) args.tries = Number(v)
    else throw new Error(`bad argument ${k} ${v}`)
  }
  if (!args.bootstrap) throw new Error('--bootstrap HOST:PORT is required')
  return args
}

const call = (fn) => new Promise((resolve, reject) => fn((err, v) => (err ? reject(err) : resolve(v))))

async function connected (client) {
  await call(cb => client.connect({ timeout: 30000 }, cb))
  return client
}

/** A topic with leaders for all its partitions. */
async function topic (admin, probe, name, partitions) {
  await call(cb => admin.createTopic({ topic: name, num_partitions: partitions, replication_factor: 3, config: { 'min.insync.replicas': '2' } }, 30000, cb))
  const deadline = Date.now() + 30000
  while (Date.now() < deadline) {
    const md = await call(cb => probe.getMetadata({ topic: name, timeout: 10000 }, cb)).catch(() => null)
    const t = md && md.topics.find(x => x.name === name)
    if (t && t.partitions.length === partitions && t.partitions.every(p => p.leader >= 0)) return
    await new Promise(resolve => setTimeout(resolve, 200))
  }
  throw new Error(`topic ${name} has no leaders after 30 s`)
}

/** Consume from every member; per "member/partition" the first offset it read (or the lasting
 * error it got), until done(seen) or the deadline. */
async function pollUntil (members, seconds, done, seen = new Map()) {
  const deadline = Date.now() + seconds * 1000
  while (Date.now() < deadline && !done(seen)) {
    for (const [name, consumer] of Object.entries(members)) {
      let messages
      try {
        messages = await call(cb => consumer.consume(10, cb))
      } catch (err) {
        if (!err.isRetriable && !TRANSIENT.has(err.code) && err.code !== CODES.ERRORS.ERR__PARTITION_EOF) {
          const key = `${name}/${err.partition === undefined ? '?' : err.partition}`
          if (!seen.has(key)) seen.set(key, `error: ${err.message}`)
        }
        continue
      }
      for (const m of messages) {
        const key = `${name}/${m.partition}`
        if (!seen.has(key)) seen.set(key, m.offset)
      }
    }
  }
  return seen
}

async function consumer (conf, src) {
  // auto.offset.reset is a topic setting: this binding's topic configuration, not the global one.
  const c = await connected(new KafkaConsumer(conf, { 'auto.offset.reset': conf['auto.offset.reset'] }))
  c.setDefaultConsumeTimeout(200)
  c.subscribe([src])
  return c
}

async function oneTry (args, n) {
  const tag = crypto.randomBytes(3).toString('hex')
  const src = `f5-src-${tag}`
  const out = `f5-out-${tag}`
  const admin = AdminClient.create({ 'bootstrap.servers': args.bootstrap })
  const plain = await connected(new Producer({ 'bootstrap.servers': args.bootstrap, dr_cb: false }))
  await topic(admin, plain, src, 2)
  await topic(admin, plain, out, 1)
  admin.disconnect()
  for (let i = 0; i < 10; i++) for (const p of [0, 1]) plain.produce(src, p, Buffer.from(String(i)))
  await call(cb => plain.flush(30000, cb))
  await call(cb => plain.disconnect(cb))
  const conf = {
    'bootstrap.servers': args.bootstrap,
    'group.id': `f5-${tag}`,
    'group.protocol': args.protocol,
    'isolation.level': 'read_committed',
    'enable.auto.commit': false,
    'auto.offset.reset': 'earliest',
    ...(args.protocol === 'classic' ? { 'session.timeout.ms': 6000 } : {}),
  }
  const first = await consumer(conf, src)
  await pollUntil({ a: first }, 30, s => s.size === 2)
  const producer = await connected(new Producer({ 'bootstrap.servers': args.bootstrap, 'transactional.id': `f5-${tag}` }))
  await call(cb => producer.initTransactions(30000, cb))
  for (const [offsets, commit] of [[{ 0: 3, 1: 3 }, true], [{ 0: 5 }, false]]) {
    await call(cb => producer.beginTransaction(cb))
    producer.produce(out, 0, Buffer.from('x'))
    const tps = Object.entries(offsets).map(([p, o]) => ({ topic: src, partition: Number(p), offset: o }))
    await call(cb => producer.sendOffsetsToTransaction(tps, first, 30000, cb))
    if (commit) await call(cb => producer.commitTransaction(30000, cb))
  }
  await call(cb => first.disconnect(cb))
  const members = { b: await consumer(conf, src), c: await consumer(conf, src) }
  const seen = await pollUntil(members, 30, s => [...s.keys()].some(k => k.endsWith('/1')))
  const holderKey = [...seen.keys()].find(k => k.endsWith('/1'))
  if (!holderKey) throw new Error('no member read partition 1 within 30 s')
  const holder = holderKey.split('/')[0]
  const waiter = holder === 'b' ? 'c' : 'b'
  await call(cb => members[holder].disconnect(cb))
  delete members[holder]
  await pollUntil(members, 20, s => s.has(`${waiter}/0`), seen)
  const early = seen.get(`${waiter}/0`)
  await call(cb => producer.commitTransaction(30000, cb))
  const after = (await pollUntil(members, 20, s => s.has(`${waiter}/0`))).get(`${waiter}/0`)
  await call(cb => members[waiter].disconnect(cb))
  await call(cb => producer.disconnect(cb))
  if (early !== undefined) {
    console.log(`try ${n}: REPRODUCED: member ${waiter} started partition 0 at ${early} while offset 5 was pending (3 committed), after its assignment grew by partition 1`)
    return true
  }
  console.log(`try ${n}: waited: member ${waiter} started partition 0 at ${after} once it committed`)
  return false
}

async function main () {
  let args
  try {
    args = parseArgs(process.argv.slice(2))
  } catch (e) {
    console.error(`error: ${e.message}`)
    return 2
  }
  console.log(`@confluentinc/kafka-javascript ${require('@confluentinc/kafka-javascript/package.json').version}, librdkafka ${librdkafkaVersion}, ${args.protocol} protocol`)
  let hits = 0
  try {
    for (let n = 1; n <= args.tries; n++) if (await oneTry(args, n)) hits++
  } catch (e) {
    console.error(`error: ${e.message || e}`)
    return 2
  }
  console.log(`reproduced in ${hits} of ${args.tries} tries`)
  return hits ? 1 : 0
}

main().then(code => process.exit(code))
