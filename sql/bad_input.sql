-- bad input: 22004 for NULLs, 22023 for bad values, IJ006 for unknown ids;
-- nothing is written by a refused call
\set VERBOSITY sqlstate
SELECT count(*) AS jobs_before FROM idemjob.jobs \gset

-- NULL for any argument but the nullable ones: 22004
SELECT * FROM idemjob.submit(NULL, 'k', 'i');
SELECT * FROM idemjob.submit('o', NULL, 'i');
SELECT * FROM idemjob.submit('o', 'k', NULL);
SELECT * FROM idemjob.submit('o', 'k', 'i', NULL);
SELECT * FROM idemjob.start_attempt(NULL);
SELECT * FROM idemjob.complete_attempt(NULL, '{}');
SELECT * FROM idemjob.complete_attempt('01a23726-b818-7b9e-ad35-89b4d8716c0c', NULL);
SELECT * FROM idemjob.fail_attempt(NULL);
SELECT * FROM idemjob.fail_attempt('01a23726-b818-7b9e-ad35-89b4d8716c0c', NULL, NULL);
SELECT * FROM idemjob.mark_unknown(NULL);
SELECT * FROM idemjob.mark_unknown('01a23726-b818-7b9e-ad35-89b4d8716c0c', NULL);
SELECT * FROM idemjob.cancel_attempt(NULL, 'r');
SELECT * FROM idemjob.cancel_attempt('01a23726-b818-7b9e-ad35-89b4d8716c0c', NULL);
SELECT * FROM idemjob.cancel_attempt('01a23726-b818-7b9e-ad35-89b4d8716c0c', 'r', NULL);
SELECT * FROM idemjob.cancel_job(NULL, 'r');
SELECT * FROM idemjob.cancel_job('01a23726-b818-7b9e-ad35-89b4d8716c0c', NULL);
SELECT * FROM idemjob.define_contract(NULL, '{}');
SELECT * FROM idemjob.define_contract('i', NULL);
SELECT * FROM idemjob.certify_provider(NULL, 'p');
SELECT * FROM idemjob.certify_provider('i', NULL);
SELECT * FROM idemjob.revoke_provider('i', 'p', NULL);
SELECT idemjob.validate(NULL, '{}');
SELECT idemjob.validate('{}', NULL);
-- NULL comes before a bad value
SELECT * FROM idemjob.submit('', 'k', NULL);

-- empty and over-long (256 bytes) names: 22023; 255 bytes is fine
SELECT * FROM idemjob.submit('', 'k', 'i');
SELECT * FROM idemjob.submit('o', '', 'i');
SELECT * FROM idemjob.submit('o', 'k', '');
SELECT * FROM idemjob.submit('o', 'k', 'i', '{}', '');
SELECT * FROM idemjob.submit(repeat('o', 256), 'k', 'i');
SELECT * FROM idemjob.submit('o', repeat('k', 256), 'i');
SELECT * FROM idemjob.submit('o', 'k', repeat('i', 256));
SELECT * FROM idemjob.submit('o', 'k', 'i', '{}', repeat('p', 256));
-- bytes, not characters: 128 two-byte characters are 256 bytes
SELECT * FROM idemjob.submit('o', repeat('é', 128), 'i');
SELECT created FROM idemjob.submit(repeat('o', 255), repeat('k', 255), repeat('i', 255), '{}', repeat('p', 255));
SELECT created FROM idemjob.submit('o', repeat('é', 127), 'i');

-- payloads over idemjob.max_payload_bytes: 22023
SET idemjob.max_payload_bytes = 100;
SELECT * FROM idemjob.submit('o', 'big', 'i', jsonb_build_object('x', repeat('a', 200)));
SELECT created FROM idemjob.submit('o', 'small', 'i', '{"x": 1}');
SELECT job_id AS p FROM idemjob.submit('o', 'small', 'i', '{"x": 1}') \gset
SELECT id AS pa FROM idemjob.start_attempt(:'p') \gset
SELECT * FROM idemjob.complete_attempt(:'pa', jsonb_build_object('x', repeat('a', 200)));
SELECT * FROM idemjob.fail_attempt(:'pa', jsonb_build_object('x', repeat('a', 200)));
SELECT state FROM idemjob.attempts WHERE id = :'pa';
RESET idemjob.max_payload_bytes;
-- the default is 1 MiB, measured on the uncompressed jsonb
SELECT * FROM idemjob.submit('o', 'huge', 'i', jsonb_build_object('x', repeat('a', 1100000)));
SHOW idemjob.max_payload_bytes;

-- non-positive timeouts: 22023
SELECT * FROM idemjob.start_attempt(:'p', timeout => '0 seconds');
SELECT * FROM idemjob.start_attempt(:'p', timeout => '-1 second');
SELECT * FROM idemjob.start_attempt(:'p', timeout => '1 day -25 hours');
SET idemjob.attempt_timeout = -1;
-- a deadline past the end of time is an argument error too, checked before the id
SELECT * FROM idemjob.start_attempt(:'p', timeout => '300000 years');
SELECT * FROM idemjob.start_attempt('01a23726-b818-7b9e-ad35-89b4d8716c0c', timeout => '300000 years');

-- unknown ids: IJ006
SELECT * FROM idemjob.start_attempt('01a23726-b818-7b9e-ad35-89b4d8716c0c');
SELECT * FROM idemjob.cancel_job('01a23726-b818-7b9e-ad35-89b4d8716c0c', 'r');
SELECT * FROM idemjob.complete_attempt('01a23726-b818-7b9e-ad35-89b4d8716c0c', '{}');
SELECT * FROM idemjob.fail_attempt('01a23726-b818-7b9e-ad35-89b4d8716c0c');
SELECT * FROM idemjob.mark_unknown('01a23726-b818-7b9e-ad35-89b4d8716c0c');
SELECT * FROM idemjob.cancel_attempt('01a23726-b818-7b9e-ad35-89b4d8716c0c', 'r');
-- a malformed uuid is the uuid type's own error
SELECT * FROM idemjob.start_attempt('not-a-uuid');
-- a value check comes before the id check
SELECT * FROM idemjob.start_attempt('01a23726-b818-7b9e-ad35-89b4d8716c0c', '');

-- nothing was written by any refused call
SELECT count(*) - :jobs_before AS jobs_added FROM idemjob.jobs;
SELECT count(*) FROM idemjob.attempts WHERE job_id = :'p';

-- the messages a person reads
\set VERBOSITY default
SELECT * FROM idemjob.submit('o', repeat('k', 256), 'i');
SELECT * FROM idemjob.submit('o', 'k', NULL);
SET idemjob.max_payload_bytes = 100;
SELECT * FROM idemjob.submit('o', 'big', 'i', jsonb_build_object('x', repeat('a', 200)));
RESET idemjob.max_payload_bytes;
SELECT * FROM idemjob.start_attempt(:'p', timeout => '0 seconds');
