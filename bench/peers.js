#!/usr/bin/env node
//
// bench/peers.js: W7 pgbench scripts from the peers' OWN SQL, taken at bench
// time from the npm packages installed in NPM_DIR (nothing of theirs is
// copied into this repository).
//
//   node bench/peers.js graphile NPM_DIR OUT_DIR TASK_ID [IDENTIFIER]
//   node bench/peers.js pgboss   NPM_DIR OUT_DIR N [QUEUE]
//
// Each peer's query builders are called as its worker calls them, with a fake
// database client that records every {text, values} and answers plausibly
// instead of running anything.  The recorded claim and completion queries are
// written, text unchanged, as a pgbench script OUT_DIR/<peer>_claim_one.sql:
// their $n parameters become pgbench variables (`:name`, bound as parameters
// by pgbench -M extended/prepared as the node driver binds them, with the
// value the driver would send: pg/lib/utils prepareValue), given on the
// pgbench command line by OUT_DIR/<peer>.vars (one name=value a line, for
// -D).  The job id the claim returns is read with \aset and bound where the
// completion has it ($1 -> :id, an array of it [$n] -> ARRAY[:id]).
// pgboss also writes OUT_DIR/pgboss_schema.sql (its construction plans),
// pgboss_queue.sql (createQueue) and pgboss_fill.sql (insert() of N jobs),
// with the values as SQL literals, for psql.
// Prints one line: "<package version> <pgbench -M mode the peer's driver
// use matches> <presence variable>".
//
'use strict';
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');

const [peer, npmDir, outDir, arg1, arg2] = process.argv.slice(2);
if (!peer || !npmDir || !outDir || !arg1) {
	console.error('usage: peers.js graphile|pgboss NPM_DIR OUT_DIR TASK_ID|N [NAME]');
	process.exit(2);
}
const NM = path.join(path.resolve(npmDir), 'node_modules');
const need = (m) => require(path.join(NM, m));
const { prepareValue } = need('pg/lib/utils');
const ID = '\u0000job-id\u0000';	// stands for the claimed job's id

function die(msg) { console.error('peers.js: ' + msg); process.exit(1); }

// query text with $n -> pgbench variables; vars gets name=value for -D
function forPgbench(q, prefix, idVar, vars) {
	if (q.text.includes('$$')) die('dollar quoting in ' + q.text);
	const text = q.text.replace(/\$(\d+)/g, (_, n) => {
		const v = (q.values || [])[n - 1];
		if (v === ID) return ':' + idVar;
		if (Array.isArray(v) && v.length === 1 && v[0] === ID) return 'ARRAY[:' + idVar + ']';
		if (v === null || v === undefined) return 'NULL';
		const s = prepareValue(v);
		if (/[\n\r]/.test(s)) die('parameter with a newline: ' + s);
		const name = prefix + n;
		vars.set(name, s);
		return ':' + name;
	});
	// anything else pgbench would take for a variable?
	for (const m of text.matchAll(/(^|[^:]):([A-Za-z_][A-Za-z0-9_]*)/g))
		if (m[2] !== idVar && !vars.has(m[2])) die('":' + m[2] + '" in the query text');
	return text.trimEnd().replace(/;$/, '');
}

// query text with $n -> SQL literals, for psql
function forPsql(q, overrides = {}) {
	return q.text.replace(/\$(\d+)(?![0-9])/g, (_, n) => {
		if (n in overrides) return overrides[n];
		const v = (q.values || [])[n - 1];
		if (v === null || v === undefined) return 'NULL';
		return "'" + String(prepareValue(v)).replace(/'/g, "''") + "'";
	});
}

function script(header, prefix, presence, claim, complete) {
	return [
		'-- GENERATED at bench time by bench/peers.js; not part of the repository.',
		...header.map((l) => '-- ' + l),
		`\\set ${prefix}${presence} 0`,
		claim,
		`\\aset ${prefix}`,
		`\\if :${prefix}${presence} != 0`,
		complete + ';',
		'\\endif',
		''].join('\n');
}

function writeVars(file, vars) {
	fs.writeFileSync(file, [...vars].map(([k, v]) => `${k}=${v}\n`).join(''));
}

async function graphile() {
	const dir = path.join(NM, 'graphile-worker');
	const version = require(path.join(dir, 'package.json')).version;
	const { batchGetJobs } = require(path.join(dir, 'dist/sql/getJobs.js'));
	const { batchCompleteJobs } = require(path.join(dir, 'dist/sql/completeJobs.js'));
	const { makeWorkerPresetWorkerOptions } = require(path.join(dir, 'dist/config.js'));
	const { defaultLogger } = require(path.join(dir, 'dist/logger.js'));
	const { Client } = need('pg');
	const taskId = parseInt(arg1, 10);
	const identifier = arg2 || 'w7';
	if (!(taskId > 0)) die('bad task id ' + arg1);

	// the defaults its worker runs with (preparedStatements true, useNodeTime false)
	const worker = { ...makeWorkerPresetWorkerOptions(), schema: 'graphile_worker' };
	const cso = {
		workerSchema: worker.schema,
		escapedWorkerSchema: Client.prototype.escapeIdentifier(worker.schema),
		resolvedPreset: { worker },
		logger: defaultLogger,
	};
	const log = [];
	const client = {
		query: async (q) => {
			log.push(q);
			if (/^select id, identifier from/.test(q.text)) return { rows: [{ id: taskId, identifier }] };
			if (/^insert into/.test(q.text)) return { rows: [] };
			return { rows: [{ id: ID, job_queue_id: null, task_id: taskId, payload: {}, attempts: 1 }] };
		},
	};
	const withPgClient = async (cb) => cb(client);
	withPgClient.withRetries = withPgClient;
	// as main.js getJob (no local queue): batch size 1, no flags; pool id as main.js makes it
	const poolId = `pool-${crypto.randomBytes(9).toString('hex')}`;
	const jobs = await batchGetJobs(cso, withPgClient, { [identifier]: () => {} }, poolId, null, 1);
	const getJob = log[log.length - 1];
	if (jobs.length !== 1 || !getJob.values || getJob.values[0] !== poolId)
		die('batchGetJobs did not issue the expected get_job query');
	const n0 = log.length;
	// as main.js completeJob without batching
	await batchCompleteJobs(cso, withPgClient, poolId, jobs);
	if (log.length !== n0 + 1) die('batchCompleteJobs issued ' + (log.length - n0) + ' queries');
	const completeJob = log[n0];

	const vars = new Map();
	const claim = forPgbench(getJob, 'gw_get_', 'gw_id', vars);
	const complete = forPgbench(completeJob, 'gw_done_', 'gw_id', vars);
	if (!complete.includes(':gw_id')) die('the completion does not take the job id');
	fs.writeFileSync(path.join(outDir, 'graphile_claim_one.sql'), script([
		`W7 Graphile Worker ${version}: get_job (dist/sql/getJobs.js batchGetJobs, batch size 1,`,
		`prepared statement "${getJob.name}"), then complete_job (dist/sql/completeJobs.js`,
		`batchCompleteJobs, "${completeJob.name}") in a second transaction.`,
	], 'gw_', 'id', claim, complete));
	writeVars(path.join(outDir, 'graphile.vars'), vars);
	console.log(`${version} ${worker.preparedStatements ? 'prepared' : 'extended'} id`);
}

async function pgboss() {
	const dir = path.join(NM, 'pg-boss');
	const version = require(path.join(dir, 'package.json')).version;
	const PgBoss = require(dir);
	const n = parseInt(arg1, 10);
	const queue = arg2 || 'w7';
	if (!(n > 0)) die('bad N ' + arg1);

	const log = [];
	let fetched = 0;
	const db = {
		executeSql: async (text, values) => {
			const q = { text, values };
			log.push(q);
			if (/^\s*WITH next as/.test(text)) {	// fetchNextJob: one job, then an empty queue
				q.kind = 'fetch';
				return { rows: fetched++ ? [] : [{ id: ID, name: queue, data: {}, expireInSeconds: 900 }] };
			}
			if (/^\s*WITH results AS/.test(text)) {	// completeJobs
				q.kind = 'complete';
				return { rows: [{ count: '1' }] };
			}
			return { rows: [] };
		},
	};
	const boss = new PgBoss({ db });	// default schema pgboss, not started: nothing runs

	fs.writeFileSync(path.join(outDir, 'pgboss_schema.sql'), PgBoss.getConstructionPlans() + ';\n');
	log.length = 0;
	await boss.createQueue(queue);
	fs.writeFileSync(path.join(outDir, 'pgboss_queue.sql'), log.map((q) => forPsql(q) + ';\n').join(''));
	log.length = 0;
	await boss.insert(Array.from({ length: n }, () => ({ name: queue, data: {} })));
	if (log.length !== 1) die('insert() issued ' + log.length + ' queries');
	fs.writeFileSync(path.join(outDir, 'pgboss_fill.sql'), forPsql(log[0]) + ';\n');

	// a worker as work() runs it: fetch (batchSize 1), handler, complete(name, [id], result)
	log.length = 0;
	await boss.work(queue, async () => ({ ok: true }));
	for (let i = 0; i < 200 && !log.some((q) => q.kind === 'complete'); i++)
		await new Promise((r) => setTimeout(r, 10));
	const fetch = log.find((q) => q.kind === 'fetch');
	const complete = log.find((q) => q.kind === 'complete');
	if (!fetch || !complete) die('work() did not fetch and complete');
	if (!complete.values.some((v) => Array.isArray(v) && v[0] === ID)) die('complete() without the job id');

	const vars = new Map();
	const claim = forPgbench(fetch, 'pb_get_', 'pb_id', vars);
	const done = forPgbench(complete, 'pb_done_', 'pb_id', vars);
	// the claim returns id, name, data, "expireInSeconds": the last one is numeric,
	// so it tells pgbench's \if whether a job came back
	fs.writeFileSync(path.join(outDir, 'pgboss_claim_one.sql'), script([
		`W7 pg-boss ${version}: work()'s fetch (src/plans.js fetchNextJob, batchSize 1),`,
		`then complete() (src/plans.js completeJobs) in a second transaction; its`,
		`driver sends each as an unnamed statement (pgbench -M extended).`,
	], 'pb_', 'expireInSeconds', claim, done));
	writeVars(path.join(outDir, 'pgboss.vars'), vars);
	console.log(`${version} extended expireInSeconds`);
	process.exit(0);	// the fake worker keeps polling
}

({ graphile, pgboss }[peer] || (() => die('unknown peer ' + peer)))().catch((e) => die(e.stack || String(e)));
