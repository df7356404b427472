-- W3 and W6: the life of a job as a client drives it, three calls (three
-- transactions): submit, start_attempt, complete_attempt.  :intent and
-- :result come from -D (W6: a 2 KB result, intent with or without contract).
\set k random(1, 1000000000000000)
\set o :k % 1000
SELECT job_id FROM idemjob.submit(:o, :k, :intent, jsonb_build_object('amount', :k::bigint, 'currency', 'EUR')) \gset
SELECT id AS attempt_id FROM idemjob.start_attempt(:job_id) \gset
SELECT outcome FROM idemjob.complete_attempt(:attempt_id, :result) \gset
