-- A column added to idemjob's tables while a connection is open (issue 17,
-- finding 16): the functions that return the tables' row types build their
-- rows with the new columns at once.  1.1 cached each function's row type
-- for the life of the connection: after ADD COLUMN, start_attempt() and
-- job() failed with "datum's descriptor has fewer (15) attributes than
-- tuple (16)" until the connection was closed.  (ALTER EXTENSION UPDATE in
-- another session changes the tables the same way.)
SELECT job_id AS aj FROM idemjob.submit('alter', 'alter-1', 'alter_intent', '{"n": 1}') \gset
SELECT state FROM idemjob.job(:'aj');
SELECT attempt_no FROM idemjob.start_attempt(:'aj');
ALTER TABLE idemjob.jobs ADD COLUMN dba_note text;
ALTER TABLE idemjob.attempts ADD COLUMN dba_note text;
SELECT state, dba_note FROM idemjob.job(:'aj');
SELECT state, dba_note FROM idemjob.heartbeat((SELECT id FROM idemjob.attempts WHERE job_id = :'aj'));
SELECT outcome FROM idemjob.complete_attempt((SELECT id FROM idemjob.attempts WHERE job_id = :'aj'), '{"ok": true}');
ALTER TABLE idemjob.jobs DROP COLUMN dba_note;
ALTER TABLE idemjob.attempts DROP COLUMN dba_note;
SELECT state FROM idemjob.job(:'aj');
SELECT created, state FROM idemjob.submit('alter', 'alter-1', 'alter_intent', '{"n": 1}');
