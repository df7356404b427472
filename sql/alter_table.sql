-- Columns of idemjob's tables (issue 17, findings 13 and 16).
--
-- A column a DBA adds is refused (an event trigger, since 1.2): pg_dump
-- wrote the table's rows with it, the restore created the table without
-- it, and COPY lost every job.
SELECT created FROM idemjob.submit('alter', 'alter-0', 'alter_intent');
ALTER TABLE idemjob.jobs ADD COLUMN dba_note text;
ALTER TABLE idemjob.attempts DROP COLUMN worker;
ALTER TABLE idemjob.jobs RENAME COLUMN params TO p;
ALTER TABLE idemjob.jobs ALTER COLUMN priority TYPE int8;
-- what changes no column is let through
ALTER TABLE idemjob.jobs ALTER COLUMN params SET STATISTICS 200;
ALTER TABLE idemjob.jobs ALTER COLUMN params SET STATISTICS -1;
-- a table of your own is yours
CREATE TABLE public.alter_mine (a int);
ALTER TABLE public.alter_mine ADD COLUMN b int;
DROP TABLE public.alter_mine;
--
-- A column added while a connection is open (a superuser who disabled the
-- event trigger, or ALTER EXTENSION UPDATE in another session): the
-- functions that return the tables' row types build their rows with the
-- new columns at once.  1.1 cached each function's row type
-- for the life of the connection: after ADD COLUMN, start_attempt() and
-- job() failed with "datum's descriptor has fewer (15) attributes than
-- tuple (16)" until the connection was closed.  (ALTER EXTENSION UPDATE in
-- another session changes the tables the same way.)
SELECT job_id AS aj FROM idemjob.submit('alter', 'alter-1', 'alter_intent', '{"n": 1}') \gset
SELECT state FROM idemjob.job(:'aj');
SELECT attempt_no FROM idemjob.start_attempt(:'aj');
ALTER EVENT TRIGGER idemjob_ddl_guard DISABLE;
ALTER TABLE idemjob.jobs ADD COLUMN dba_note text;
ALTER TABLE idemjob.attempts ADD COLUMN dba_note text;
SELECT state, dba_note FROM idemjob.job(:'aj');
SELECT state, dba_note FROM idemjob.heartbeat((SELECT id FROM idemjob.attempts WHERE job_id = :'aj'));
SELECT outcome FROM idemjob.complete_attempt((SELECT id FROM idemjob.attempts WHERE job_id = :'aj'), '{"ok": true}');
ALTER TABLE idemjob.jobs DROP COLUMN dba_note;
ALTER TABLE idemjob.attempts DROP COLUMN dba_note;
ALTER EVENT TRIGGER idemjob_ddl_guard ENABLE;
SELECT state FROM idemjob.job(:'aj');
SELECT created, state FROM idemjob.submit('alter', 'alter-1', 'alter_intent', '{"n": 1}');
