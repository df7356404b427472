-- profile only: complete attempt :att of preloaded job :base + i.
\set n 100000000000 + 10 * (:base + :i) + :att
\set i :i + 1
SELECT outcome FROM idemjob.complete_attempt(('00000000-0000-7000-8000-' || :n)::uuid, :result) \gset
