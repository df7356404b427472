-- W4: contention.  Preloaded job j (ids from n = 100000000000 + 10*j) has
-- attempt 1 cancelled (n+1) and attempt 2 started (n+2), both read version 0.
-- Iteration i of client c takes slot s = i*:nclients + c: job :base + s/2,
-- attempt s%2 + 1, so clients 2m and 2m+1 complete the two attempts of the
-- same job at the same moment.  Run with -D i=0 and -t (2*jobs/clients).
\set s :i * :nclients + :client_id
\set i :i + 1
\set n 100000000000 + 10 * (:base + :s / 2) + :s % 2 + 1
SELECT outcome FROM idemjob.complete_attempt(('00000000-0000-7000-8000-' || :n)::uuid, :result) \gset
