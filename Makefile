# Makefile for idemjob (PGXS)

EXTENSION = idemjob
EXTVERSION = $(shell grep default_version $(EXTENSION).control | sed -e "s/default_version[[:space:]]*=[[:space:]]*'\([^']*\)'/\1/")

MODULE_big = idemjob
OBJS = \
	src/idemjob.o \
	src/uuidv7.o \
	src/spi_plans.o \
	src/forward.o \
	src/jobs.o \
	src/attempts.o \
	src/commit.o \
	src/triggers.o \
	src/contracts.o \
	src/validator_compile.o \
	src/validator_link.o \
	src/validator_regex.o \
	src/validator_check.o \
	src/rights.o \
	src/claim.o \
	src/await.o \
	src/sweeper.o \
	src/retention.o \
	src/routes.o \
	src/stats.o \

# sql/ holds the install and update scripts (the released ones, and one
# built from two of them: the update from 1.0 straight to 1.2, below) and,
# beside them, the pg_regress suite (sql/NAME.sql, expected/NAME.out).
SCRIPTS_SQL = $(wildcard sql/$(EXTENSION)--*.sql)
DATA = $(filter-out sql/$(EXTENSION)--1.0--1.2.sql,$(SCRIPTS_SQL))
DATA_built = sql/$(EXTENSION)--1.0--1.2.sql

REGRESS = $(patsubst sql/%.sql,%,$(sort $(filter-out $(SCRIPTS_SQL) $(DATA_built),$(wildcard sql/*.sql))))
REGRESS_OPTS = --load-extension=$(EXTENSION)
# the isolation suite: test/isolation/specs/NAME.spec, test/isolation/expected/NAME.out
ISOLATION = $(patsubst test/isolation/specs/%.spec,%,$(sort $(wildcard test/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test/isolation --load-extension=$(EXTENSION)


# -Wno-unused-parameter: PostgreSQL's own headers do not build clean without it
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Werror
# the library knows the version of the SQL objects it works on (rights.c)
PG_CPPFLAGS = -DIDEMJOB_VERSION=\"$(EXTVERSION)\"

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# every file includes the shared header: a changed struct rebuilds them all
$(OBJS) $(OBJS:.o=.bc): src/idemjob.h
$(filter src/validator_%,$(OBJS) $(OBJS:.o=.bc)) src/contracts.o src/contracts.bc src/triggers.o src/triggers.bc: src/validator.h
$(filter src/validator_%,$(OBJS) $(OBJS:.o=.bc)): src/validator_int.h

# sql/idemjob--1.0--1.1.sql is released and never edited, but it quotes a
# role name twice when it takes back a grant (format %I of regrole's text,
# already quoted): CREATE EXTENSION and the update from 1.0 failed for a
# role such as "app-user" holding a grant, e.g. from default privileges.
# PostgreSQL takes the shortest update path, so a one-step 1.0 -> 1.2 script
# replaces that step for new installs and for updates from 1.0: the 1.0 ->
# 1.1 script with the name quoted once, then the 1.1 -> 1.2 script.  Built,
# so that each line is written once.
sql/$(EXTENSION)--1.0--1.2.sql: sql/$(EXTENSION)--1.0--1.1.sql sql/$(EXTENSION)--1.1--1.2.sql
	{ printf '%s\n' '/* sql/idemjob--1.0--1.2.sql: built by the Makefile from sql/idemjob--1.0--1.1.sql and sql/idemjob--1.1--1.2.sql */' \
		'\echo Use "ALTER EXTENSION idemjob UPDATE TO '"'"'1.2'"'"'" to load this file. \quit'; \
	  grep -v '^\\echo' sql/$(EXTENSION)--1.0--1.1.sql | \
		sed 's/r\.grantee::pg_catalog\.regrole::pg_catalog\.text)/pg_catalog.pg_get_userbyid(r.grantee))/'; \
	  grep -v '^\\echo' sql/$(EXTENSION)--1.1--1.2.sql; } >$@
	@test "$$(grep -c 'pg_get_userbyid(r.grantee))' $@)" = 2 || { echo "$@: the two role names to quote once were not found" >&2; rm -f $@; exit 1; }

.PHONY: test scenario
test:
	bash test/run-tests.sh

scenario:
	bash scenario/run.sh
