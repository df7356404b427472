-- test/citus/restore_source.sql: the rows test/citus/run.sh dumps from a
-- database on one server and restores into a distributed one: a contract
-- and a certification; twenty owners with a job each: five won (two of
-- them purged: spent keys), one in doubt, one whose fenced attempt's late
-- result lost (a race-log row) and is pending again, one running, twelve
-- pending.
SELECT idemjob.define_contract('r', '{"type": "object"}');
SELECT idemjob.certify_provider('r', 'alt', '{"suite": "restore"}');
SELECT count(*) FROM (SELECT idemjob.submit('r' || i, 'k', 'r', pg_catalog.jsonb_build_object('i', i)) FROM generate_series(1, 20) i) x;
SELECT count(*) FROM (SELECT idemjob.start_attempt(id) FROM idemjob.jobs WHERE owner_id IN ('r1','r2','r3','r4','r5','r6','r7','r8')) x;
SELECT count(*) FROM (SELECT idemjob.complete_attempt(id, '{"done": true}') FROM idemjob.attempts WHERE owner_id IN ('r1','r2','r3','r4','r5')) x;
SELECT count(*) FROM (SELECT idemjob.mark_unknown(id, 'timeout') FROM idemjob.attempts WHERE owner_id IN ('r6', 'r7')) x;
SELECT count(*) FROM (SELECT idemjob.cancel_attempt(id, 'fenced', true) FROM idemjob.attempts WHERE owner_id = 'r7') x;
SELECT count(*) FROM (SELECT idemjob.complete_attempt(id, '{"late": true}') FROM idemjob.attempts WHERE owner_id = 'r7') x;
SELECT count(*) FROM idemjob.purge('0 seconds', 2);
