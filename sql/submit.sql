-- submit(): one job per (owner_id, idempotency_key)
\set VERBOSITY sqlstate

-- a new key creates a pending job at version 0
SELECT created, state, version, result IS NULL AS no_result
  FROM idemjob.submit('alice', 'order-1', 'charge', '{"amount": 5, "currency": "EUR"}');
SELECT job_id AS j1 FROM idemjob.submit('alice', 'order-1', 'charge', '{"amount": 5, "currency": "EUR"}') \gset

-- double click: the same job, created = false
SELECT job_id = :'j1' AS same_job, created, state, version
  FROM idemjob.submit('alice', 'order-1', 'charge', '{"amount": 5, "currency": "EUR"}');

-- params compared as jsonb: key order, whitespace and 5.0 vs 5 do not matter
SELECT job_id = :'j1' AS same_job, created
  FROM idemjob.submit('alice', 'order-1', 'charge', '{ "currency":"EUR",   "amount": 5.0 }');

-- the default provider is idemjob.default_provider; naming it is the same request
SELECT provider FROM idemjob.jobs WHERE id = :'j1';
SELECT job_id = :'j1' AS same_job FROM idemjob.submit('alice', 'order-1', 'charge', '{"amount": 5, "currency": "EUR"}', 'default');

-- the same key with another request: IJ001, and nothing changes
SELECT * FROM idemjob.submit('alice', 'order-1', 'charge', '{"amount": 6, "currency": "EUR"}');
SELECT * FROM idemjob.submit('alice', 'order-1', 'refund', '{"amount": 5, "currency": "EUR"}');
SELECT * FROM idemjob.submit('alice', 'order-1', 'charge', '{"amount": 5, "currency": "EUR"}', 'other-ai');
SELECT * FROM idemjob.submit('alice', 'order-1', 'charge');
SELECT count(*), min(params::text) FROM idemjob.jobs WHERE owner_id = 'alice';

-- the DETAIL names what differs
\set VERBOSITY default
-- (a job inserted by hand, fresh and pending, so that its id is known)
INSERT INTO idemjob.jobs (id, owner_id, idempotency_key, intent, params, provider, owner_hash)
  VALUES ('01a23729-5b03-7b67-b518-5e4de846fc95', 'carol', 'k', 'charge', '{"a": 1}', 'p1', 'carol'::text);
SELECT * FROM idemjob.submit('carol', 'k', 'refund', '{"a": 1}', 'p1');
SELECT * FROM idemjob.submit('carol', 'k', 'charge', '{"a": 1}', 'p2');
\set VERBOSITY sqlstate

-- keys are per owner
SELECT created FROM idemjob.submit('bob', 'order-1', 'charge', '{"amount": 5, "currency": "EUR"}');
SELECT count(*) FROM idemjob.jobs WHERE idempotency_key = 'order-1';

-- another default provider applies to new jobs only
SET idemjob.default_provider = 'fast-ai';
SELECT created FROM idemjob.submit('alice', 'order-2', 'charge');
SELECT provider, params FROM idemjob.jobs WHERE owner_id = 'alice' AND idempotency_key = 'order-2';
-- and the old job asked again under the new default is another request
SELECT * FROM idemjob.submit('alice', 'order-1', 'charge', '{"amount": 5, "currency": "EUR"}');
RESET idemjob.default_provider;
SET idemjob.default_provider = '';

-- a job id is a time-ordered UUID, version 7
SELECT substr(id::text, 15, 1) AS uuid_version FROM idemjob.jobs WHERE id = :'j1';
SELECT (SELECT job_id FROM idemjob.submit('alice', 'order-3', 'charge')) > :'j1' AS later_sorts_after;

-- a finished job answers a replay with its state, version and result
SELECT id AS a FROM idemjob.start_attempt(:'j1') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a', '{"charge_id": "ch_1"}');
SELECT created, state, version, result
  FROM idemjob.submit('alice', 'order-1', 'charge', '{"amount": 5, "currency": "EUR"}');

-- a call inside a rolled-back transaction leaves nothing
BEGIN;
SELECT created FROM idemjob.submit('alice', 'rolled-back', 'charge');
ROLLBACK;
SELECT count(*) FROM idemjob.jobs WHERE idempotency_key = 'rolled-back';
