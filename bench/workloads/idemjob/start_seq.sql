-- profile only: start_attempt on preloaded pending job :base + i.
\set n 100000000000 + 10 * (:base + :i)
\set i :i + 1
SELECT id FROM idemjob.start_attempt(('00000000-0000-7000-8000-' || :n)::uuid) \gset
