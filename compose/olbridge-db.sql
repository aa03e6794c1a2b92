-- olbridge's role and database on the stack's PostgreSQL server, beside Marquez's. Run by the
-- olbridge-db-setup service on every start, as the server's superuser:
--   psql --set=password_file=FILE --file=olbridge-db.sql
-- Made when missing; the role's password is set from the secrets file each time, so a changed
-- secret applies at the next start. The password never appears on a command line.

\set ON_ERROR_STOP on
\set password `cat :'password_file'`

SELECT format('CREATE ROLE olbridge LOGIN PASSWORD %L', :'password')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'olbridge')
\gexec

SELECT format('ALTER ROLE olbridge LOGIN PASSWORD %L', :'password')
\gexec

\unset password

SELECT 'CREATE DATABASE olbridge OWNER olbridge'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'olbridge')
\gexec

-- only its owner (and the superuser) connects to it
REVOKE ALL ON DATABASE olbridge FROM PUBLIC;
GRANT CONNECT, TEMPORARY ON DATABASE olbridge TO olbridge;
