-- test/upgrade/helpers.sql: helpers of the upgrade and dump/restore tests,
-- in their own schema ij_check (never part of the extension).
--
--   ij_check.remember_columns()  records the current columns of every
--                                idemjob table (the extension's config tables)
--   ij_check.snapshot(tag)       copies every row of those tables, as text of
--                                the remembered columns, under tag
--   ij_check.table_md5()         per table: row count and md5 of all rows
--                                (every current column, rows in text order)
--   ij_check.sqlstate(stmt)      runs stmt, returns its SQLSTATE ('00000')

CREATE SCHEMA IF NOT EXISTS ij_check;
GRANT USAGE ON SCHEMA ij_check TO PUBLIC;

CREATE TABLE IF NOT EXISTS ij_check.cols (
	tab		text PRIMARY KEY,
	cols	text NOT NULL
);

CREATE TABLE IF NOT EXISTS ij_check.rows (
	tag		text NOT NULL,
	tab		text NOT NULL,
	r		text NOT NULL
);

-- the extension's tables, from pg_extension.extconfig
CREATE OR REPLACE FUNCTION ij_check.tables()
RETURNS SETOF regclass
LANGUAGE sql STABLE AS $$
	-- (a table of the partitioned layout, idemjob.partitions, as one: its
	-- partitions are on the list too, for their rows)
	SELECT c::regclass
	FROM pg_catalog.pg_extension e, unnest(e.extconfig) c
	WHERE e.extname = 'idemjob'
	  AND NOT (SELECT relispartition FROM pg_catalog.pg_class WHERE oid = c)
	ORDER BY 1::text
$$;

CREATE OR REPLACE FUNCTION ij_check.column_list(t regclass)
RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum)
	FROM pg_catalog.pg_attribute
	WHERE attrelid = t AND attnum > 0 AND NOT attisdropped
$$;

CREATE OR REPLACE FUNCTION ij_check.remember_columns()
RETURNS void
LANGUAGE sql AS $$
	DELETE FROM ij_check.cols;
	INSERT INTO ij_check.cols
	SELECT t::text, ij_check.column_list(t) FROM ij_check.tables() t;
$$;

CREATE OR REPLACE FUNCTION ij_check.snapshot(p_tag text)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	c record;
	n bigint;
	total bigint := 0;
BEGIN
	DELETE FROM ij_check.rows WHERE tag = p_tag;
	FOR c IN SELECT tab, cols FROM ij_check.cols ORDER BY tab LOOP
		EXECUTE format('INSERT INTO ij_check.rows SELECT %L, %L, ROW(%s)::text FROM %s',
					   p_tag, c.tab, c.cols, c.tab);
		GET DIAGNOSTICS n = ROW_COUNT;
		total := total + n;
	END LOOP;
	RETURN total;
END
$$;

CREATE OR REPLACE FUNCTION ij_check.table_md5()
RETURNS TABLE(tab text, n bigint, md5 text)
LANGUAGE plpgsql AS $$
DECLARE
	t regclass;
BEGIN
	FOR t IN SELECT * FROM ij_check.tables() LOOP
		tab := t::text;
		EXECUTE format('SELECT count(*), md5(coalesce(string_agg(r, E''\n'' ORDER BY r COLLATE "C"), '''')) '
					   'FROM (SELECT ROW(%s)::text AS r FROM %s) s',
					   ij_check.column_list(t), t)
			INTO n, md5;
		RETURN NEXT;
	END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION ij_check.sqlstate(stmt text)
RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE stmt;
	RETURN '00000';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END
$$;
