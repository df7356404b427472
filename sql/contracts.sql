-- output contracts and certified failover (I6)
\set VERBOSITY sqlstate

-- contract versions count 1, 2, ...; the same schema again changes nothing
SELECT idemjob.define_contract('summarize', '{"type": "object", "required": ["summary"],
	"properties": {"summary": {"type": "string"}}, "additionalProperties": false}');
SELECT idemjob.define_contract('summarize', '{"additionalProperties": false, "required": ["summary"],
	"type": "object", "properties": {"summary": {"type": "string"}}}');
SELECT intent, version FROM idemjob.contracts;
-- an unsupported keyword or a bad schema is refused, and nothing changes
SELECT idemjob.define_contract('summarize', '{"type": "object", "unevaluatedProperties": false}');
SELECT idemjob.define_contract('summarize', '{"type": "object", "properies": {}}');
SELECT idemjob.define_contract('summarize', '{"minLength": -1}');
SELECT idemjob.define_contract('summarize', '{"pattern": "("}');
SELECT idemjob.define_contract('summarize', '{"$ref": "#/$defs/missing"}');
SELECT idemjob.define_contract('summarize', '[]');
SELECT idemjob.define_contract('', '{}');
SELECT version FROM idemjob.contracts WHERE intent = 'summarize';
\set VERBOSITY default
SELECT idemjob.define_contract('summarize', '{"type": "object", "unevaluatedProperties": false}');
\set VERBOSITY sqlstate

-- a job on its own provider needs no certification
SELECT job_id AS j FROM idemjob.submit('ctr', 'doc-1', 'summarize', '{"doc": 1}', 'primary-ai') \gset
SELECT id AS a1 FROM idemjob.start_attempt(:'j') \gset

-- a result that breaks the contract never wins: rejected, the attempt failed,
-- the job free for a new attempt, and this commits
SELECT outcome, job_version, winner_attempt_id IS NULL AS no_winner
  FROM idemjob.complete_attempt(:'a1', '{"summary": "ok", "confidence": 0.9}');
SELECT state, error FROM idemjob.attempts WHERE id = :'a1';
SELECT state, version, result IS NULL AS no_result FROM idemjob.jobs WHERE id = :'j';
-- retried with the same result: the same answer; with another: IJ001
SELECT outcome FROM idemjob.complete_attempt(:'a1', '{"confidence": 0.9, "summary": "ok"}');
SELECT * FROM idemjob.complete_attempt(:'a1', '{"summary": "ok"}');
-- wrong type, missing property
SELECT id AS a2 FROM idemjob.start_attempt(:'j') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a2', '{"summary": 42}');
SELECT error FROM idemjob.attempts WHERE id = :'a2';
SELECT id AS a3 FROM idemjob.start_attempt(:'j') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a3', '[]');
SELECT id AS a4 FROM idemjob.start_attempt(:'j') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a4', '{}');
SELECT error->>'keyword' AS keyword FROM idemjob.attempts WHERE id = :'a4';
-- a valid result wins
SELECT id AS a5 FROM idemjob.start_attempt(:'j') \gset
SELECT outcome, job_version FROM idemjob.complete_attempt(:'a5', '{"summary": "Revenue up."}');
SELECT attempt_no, state FROM idemjob.attempts WHERE job_id = :'j' ORDER BY attempt_no;
-- an intent without a contract accepts any result
SELECT job_id AS n FROM idemjob.submit('ctr', 'free-1', 'free-form') \gset
SELECT id AS n1 FROM idemjob.start_attempt(:'n') \gset
SELECT outcome FROM idemjob.complete_attempt(:'n1', '"anything"');

-- a late result from a cancelled attempt that breaks the contract: rejected
SELECT job_id AS c FROM idemjob.submit('ctr', 'doc-c', 'summarize', '{}', 'primary-ai') \gset
SELECT id AS c1 FROM idemjob.start_attempt(:'c') \gset
SELECT state FROM idemjob.cancel_attempt(:'c1', 'stuck');
SELECT id AS c2 FROM idemjob.start_attempt(:'c') \gset
SELECT outcome FROM idemjob.complete_attempt(:'c1', '{"bad": true}');
-- the job is still running attempt 2
SELECT state FROM idemjob.jobs WHERE id = :'c';
SELECT state FROM idemjob.attempts WHERE id = :'c1';
SELECT outcome FROM idemjob.complete_attempt(:'c2', '{"summary": "ok"}');

-- failover: another provider needs a certification for the intent
SELECT job_id AS f FROM idemjob.submit('ctr', 'doc-f', 'summarize', '{}', 'primary-ai') \gset
SELECT * FROM idemjob.start_attempt(:'f', 'fallback-ai');
-- an intent with no contract cannot be certified, so never fails over
SELECT * FROM idemjob.certify_provider('free-form', 'fallback-ai');
SELECT job_id AS g FROM idemjob.submit('ctr', 'free-2', 'free-form', '{}', 'primary-ai') \gset
SELECT * FROM idemjob.start_attempt(:'g', 'fallback-ai');
-- certified: the failover starts
SELECT intent, provider, contract_version, evidence, revoked_at IS NULL AS in_force
  FROM idemjob.certify_provider('summarize', 'fallback-ai', '{"suite": "summarize-v1", "cases": 40, "passed": 40}');
-- certifying again changes nothing (I7)
SELECT contract_version, evidence FROM idemjob.certify_provider('summarize', 'fallback-ai', '{"other": true}');
SELECT id AS f1, provider FROM idemjob.start_attempt(:'f', 'fallback-ai') \gset
SELECT :'provider' AS failover_provider;
-- IJ004 comes before IJ002: an uncertified provider is refused even while an attempt is in doubt
SELECT * FROM idemjob.start_attempt(:'f', 'cheap-ai');
SELECT * FROM idemjob.start_attempt(:'f', 'fallback-ai');
-- and IJ003 before IJ004
SELECT outcome FROM idemjob.complete_attempt(:'f1', '{"summary": "from the fallback"}');
SELECT * FROM idemjob.start_attempt(:'f', 'cheap-ai');

-- a new contract version lapses every certification
SELECT idemjob.define_contract('summarize', '{"type": "object", "required": ["summary", "lang"]}');
SELECT job_id AS h FROM idemjob.submit('ctr', 'doc-h', 'summarize', '{}', 'primary-ai') \gset
SELECT * FROM idemjob.start_attempt(:'h', 'fallback-ai');
SELECT contract_version FROM idemjob.certify_provider('summarize', 'fallback-ai', '{"suite": "summarize-v2"}');
SELECT provider, contract_version, revoked_at IS NULL AS in_force FROM idemjob.certifications ORDER BY contract_version;
SELECT id AS h1 FROM idemjob.start_attempt(:'h', 'fallback-ai') \gset
-- results are now checked against version 2
SELECT outcome FROM idemjob.complete_attempt(:'h1', '{"summary": "no lang"}');
SELECT id AS h2 FROM idemjob.start_attempt(:'h', 'fallback-ai') \gset
SELECT outcome FROM idemjob.complete_attempt(:'h2', '{"summary": "ok", "lang": "en"}');

-- revocation: no failover after it
SELECT provider, contract_version, revoked_at IS NOT NULL AS revoked, revoke_reason
  FROM idemjob.revoke_provider('summarize', 'fallback-ai', 'failed the nightly contract run');
SELECT count(*) AS still_in_force FROM idemjob.certifications WHERE revoked_at IS NULL;
SELECT job_id AS k FROM idemjob.submit('ctr', 'doc-k', 'summarize', '{}', 'primary-ai') \gset
SELECT * FROM idemjob.start_attempt(:'k', 'fallback-ai');
-- revoking again: the row as stored
SELECT revoke_reason FROM idemjob.revoke_provider('summarize', 'fallback-ai', 'another reason');
-- revoking a provider never certified, or for an intent without a contract: IJ006
SELECT * FROM idemjob.revoke_provider('summarize', 'never-ai', 'x');
SELECT * FROM idemjob.revoke_provider('free-form', 'fallback-ai', 'x');
-- certified again after passing again
SELECT revoked_at IS NULL AS in_force, evidence FROM idemjob.certify_provider('summarize', 'fallback-ai', '{"suite": "summarize-v2", "rerun": 2}');
SELECT provider FROM idemjob.start_attempt(:'k', 'fallback-ai');

-- the setting off: failover without certification (superuser only)
SELECT job_id AS s FROM idemjob.submit('ctr', 'doc-s', 'summarize', '{}', 'primary-ai') \gset
SET idemjob.require_certified_failover = off;
SELECT provider FROM idemjob.start_attempt(:'s', 'cheap-ai');
RESET idemjob.require_certified_failover;
CREATE ROLE idemjob_app;
SET ROLE idemjob_app;
SET idemjob.require_certified_failover = off;
RESET ROLE;
DROP ROLE idemjob_app;

-- since 1.1 raw SQL cannot rewrite a contract (IJ005); a new version from
-- define_contract is seen at once (the per-backend cache is invalidated)
SELECT job_id AS r FROM idemjob.submit('ctr', 'doc-r', 'summarize', '{}', 'primary-ai') \gset
SELECT id AS r1 FROM idemjob.start_attempt(:'r') \gset
UPDATE idemjob.contracts SET output_schema = '{"type": "array"}', version = version + 1 WHERE intent = 'summarize';
SELECT version AS before_version FROM idemjob.contracts WHERE intent = 'summarize' \gset
SELECT idemjob.define_contract('summarize', '{"type": "array"}') > :before_version AS new_version;
SELECT outcome FROM idemjob.complete_attempt(:'r1', '{"summary": "ok", "lang": "en"}');
SELECT id AS r2 FROM idemjob.start_attempt(:'r') \gset
SELECT outcome FROM idemjob.complete_attempt(:'r2', '["ok"]');
