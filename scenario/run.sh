#!/usr/bin/env bash
# scenario/run.sh: the main job.  Builds and installs idemjob, starts a
# throw-away PostgreSQL cluster, and walks through its guarantees.
#
#   bash scenario/run.sh
cd "$(dirname "$0")/.."
source test/lib.sh

ij_install_packages
ij_build_install
ij_start_cluster "${IDEMJOB_SCENARIO_PORT:-5498}"

psql -Xq -d postgres -c "CREATE DATABASE idemjob_demo"
psql -X -d idemjob_demo -v ON_ERROR_STOP=1 -f scenario/scenario.sql
