#!/usr/bin/env bash
# Start the local PostgreSQL 15 cluster and create the test role and database.
# Idempotent: safe to run when the cluster is already up and the role/database
# exist. Meant for a fresh machine, as root, where the `postgresql-15` package
# is installed and the `15/main` cluster exists but is stopped.
#
# Prints the URL the tests use (LEDGER_TEST_POSTGRES_URL) on stdout.
set -euo pipefail

PG_VERSION="${PG_VERSION:-15}"
PG_CLUSTER="${PG_CLUSTER:-main}"
PG_ROLE="${PG_ROLE:-ledger}"
PG_PASSWORD="${PG_PASSWORD:-ledger}"
PG_DB="${PG_DB:-ledger_test}"
PG_PORT="${PG_PORT:-5432}"

if [ "$(id -u)" -ne 0 ]; then
    echo "postgres.sh: run as root (it starts the cluster and switches to the postgres user)" >&2
    exit 1
fi

# A cluster whose data directory is missing (some minimal images) is created.
if ! pg_lsclusters -h 2>/dev/null | awk '{print $1" "$2}' | grep -qx "$PG_VERSION $PG_CLUSTER"; then
    pg_createcluster "$PG_VERSION" "$PG_CLUSTER" --port "$PG_PORT" >&2
fi

status="$(pg_lsclusters -h | awk -v v="$PG_VERSION" -v c="$PG_CLUSTER" '$1==v && $2==c {print $4}')"
if [ "$status" != "online" ]; then
    # The pid directory lives on tmpfs on many machines and may be gone.
    install -d -o postgres -g postgres -m 2775 /var/run/postgresql
    pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" "$PG_CLUSTER" start >&2
fi

# Wait for the server to accept connections (at most ~30 s).
for _ in $(seq 1 60); do
    if su postgres -c "pg_isready -q -p $PG_PORT"; then
        break
    fi
    sleep 0.5
done
su postgres -c "pg_isready -p $PG_PORT" >&2

psql_admin() {
    # Run SQL as the postgres superuser over the local socket; quiet, stop on error.
    su postgres -c "psql -v ON_ERROR_STOP=1 -qtA -p $PG_PORT -d postgres" <<<"$1"
}

if [ "$(psql_admin "SELECT 1 FROM pg_roles WHERE rolname = '$PG_ROLE'")" != "1" ]; then
    psql_admin "CREATE ROLE \"$PG_ROLE\" LOGIN SUPERUSER PASSWORD '$PG_PASSWORD'"
else
    psql_admin "ALTER ROLE \"$PG_ROLE\" LOGIN SUPERUSER PASSWORD '$PG_PASSWORD'"
fi
if [ "$(psql_admin "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" != "1" ]; then
    su postgres -c "createdb -p $PG_PORT -O '$PG_ROLE' '$PG_DB'"
fi

echo "postgresql://$PG_ROLE:$PG_PASSWORD@127.0.0.1:$PG_PORT/$PG_DB"
