-- test/soak/scripts/work.sql: workers claiming and finishing jobs, one call
-- per transaction (soak.work picks it, see setup.sql); :purge adds purges
-- and replays of purged keys.  @ISO@ is replaced by run.sh.
\set op random(1, 100)
\set r random(1, 1000000)
BEGIN ISOLATION LEVEL @ISO@;
SELECT soak.work(:phase, :client_id, :op, :r, :keys, :purge);
END;
