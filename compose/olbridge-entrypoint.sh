#!/bin/sh
# The olbridge image's entrypoint: the PostgreSQL password from a secrets file, where libpq reads it.
#
# With OLBRIDGE_DB_PASSWORD_FILE set, the file's first line becomes the pass file that PGPASSFILE
# names (default ~/.pgpass): mode 0600, as libpq requires (a secrets file mounted by compose keeps
# its host mode, which libpq would refuse), for any host, database and user. Then the command runs
# in this process's place (exec: pid 1 in a container, so it gets the stop signal). The password
# goes on no command line and into no environment variable; `docker compose exec` finds it too.
set -eu
if [ -n "${OLBRIDGE_DB_PASSWORD_FILE:-}" ]; then
    passfile="${PGPASSFILE:-$HOME/.pgpass}"
    password="$(head -n 1 "$OLBRIDGE_DB_PASSWORD_FILE")"
    if [ -z "$password" ]; then
        echo "Error: $OLBRIDGE_DB_PASSWORD_FILE is empty: it holds the catalog database's password" >&2
        exit 1
    fi
    umask 077
    # a pass file's fields escape \ and : with a backslash
    escaped="$(printf '%s' "$password" | sed -e 's/\\/\\\\/g' -e 's/:/\\:/g')"
    printf '*:*:*:*:%s\n' "$escaped" > "$passfile.new"
    mv "$passfile.new" "$passfile"
fi
exec "$@"
