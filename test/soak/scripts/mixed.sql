-- test/soak/scripts/mixed.sql: one idemjob call per transaction on a small,
-- rolling key space (soak.mixed picks the call from :op, see setup.sql).
-- @ISO@ is replaced by run.sh with the isolation level.
\set slot random(1, :slots)
\set op random(1, 100)
\set r random(1, 1000000)
BEGIN ISOLATION LEVEL @ISO@;
SELECT soak.mixed(:phase, :client_id, :slot, :op, :r);
END;
