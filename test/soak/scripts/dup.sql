-- test/soak/scripts/dup.sql: submits over a key pool; :dup percent of them
-- reuse a key from a pool of :pool keys, the rest use a fresh key.
-- @ISO@ is replaced by run.sh with the isolation level.
\set d random(1, 100)
\set k random(1, :pool)
\set u random(1, 1000000000000)
\set v random(0, 3)
BEGIN ISOLATION LEVEL @ISO@;
SELECT soak.dup(:phase, :client_id, :d, :dup, :k, :u, :v);
END;
