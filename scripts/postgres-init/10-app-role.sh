#!/bin/sh
# Run once by the postgres image on a new data volume (/docker-entrypoint-initdb.d), as the
# owner (POSTGRES_USER). Creates the role the web process and workers connect as: it owns
# nothing, so it cannot ALTER, TRUNCATE or disable the triggers of the tables the owner's
# migrations create. Its privileges are granted by `manage.py grant_app_role snaglist_app`,
# which the compose `migrate` service runs after every migrate (docs/admin.md).
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v app_password="${SNAGLIST_APP_DB_PASSWORD:?set SNAGLIST_APP_DB_PASSWORD}" <<'SQL'
CREATE ROLE snaglist_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION
    PASSWORD :'app_password';
SQL
