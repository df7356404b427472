# Makefile for idemjob (PGXS)

EXTENSION = idemjob
EXTVERSION = $(shell grep default_version $(EXTENSION).control | sed -e "s/default_version[[:space:]]*=[[:space:]]*'\([^']*\)'/\1/")

MODULE_big = idemjob
OBJS = \
	src/idemjob.o \
	src/uuidv7.o \
	src/spi_plans.o \
	src/jobs.o \
	src/attempts.o \
	src/commit.o \
	src/triggers.o \
	src/contracts.o \
	src/validator.o \
	src/rights.o \
	src/claim.o \
	src/await.o \
	src/sweeper.o \
	src/retention.o \

DATA = $(wildcard sql/$(EXTENSION)--*.sql)

TESTS = $(sort $(wildcard test/sql/*.sql))
REGRESS = $(patsubst test/sql/%.sql,%,$(TESTS))
ISOLATION = $(patsubst test/specs/%.spec,%,$(sort $(wildcard test/specs/*.spec)))
REGRESS_OPTS = --inputdir=test --load-extension=$(EXTENSION)
ISOLATION_OPTS = --inputdir=test --load-extension=$(EXTENSION)


# -Wno-unused-parameter: PostgreSQL's own headers do not build clean without it
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Werror
# the library knows the version of the SQL objects it works on (rights.c)
PG_CPPFLAGS = -DIDEMJOB_VERSION=\"$(EXTVERSION)\"

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# every file includes the shared header: a changed struct rebuilds them all
$(OBJS) $(OBJS:.o=.bc): src/idemjob.h
src/validator.o src/validator.bc src/contracts.o src/contracts.bc src/triggers.o src/triggers.bc: src/validator.h

.PHONY: test scenario
test:
	bash test/run-tests.sh

scenario:
	bash scenario/run.sh
