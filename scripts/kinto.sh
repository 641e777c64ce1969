#!/usr/bin/env bash
# Runs real Kinto servers on 127.0.0.1 for the Kinto adapter's tests. Only the results named below
# go to stdout; progress and errors go to stderr.
#
#   scripts/kinto.sh install
#       Creates the venv ${SATCHEL_KINTO_VENV:-<repo>/.build-kinto/venv} with Kinto and the
#       kinto-attachment plugin in it, if needed.
#   scripts/kinto.sh start DIR [--accounts] [--postgresql]
#       Starts a Kinto whose files live in DIR and prints its URL, http://127.0.0.1:PORT/v1, once
#       healthy. Default: memory backend, basic auth taking any user:password. --accounts: accounts
#       are the only auth (sign up with PUT /v1/accounts/NAME; a wrong password then gets 401).
#       --postgresql: a private PostgreSQL cluster in DIR/pg holds the data. If DIR has a kinto.ini,
#       this restarts that server: same config and ports (flags ignored), same PostgreSQL data.
#       Attachments (kinto-attachment) are stored in DIR/attachments, which a static file server
#       on a port of its own serves (Kinto does not serve them itself); it starts and stops with
#       Kinto.
#   scripts/kinto.sh stop DIR
#       Stops the Kinto of DIR and its file server, if running; its PostgreSQL keeps running.
#   scripts/kinto.sh psql DIR [PSQL ARGS...]
#       Runs psql on the Kinto database of DIR's PostgreSQL cluster.
#   scripts/kinto.sh up ROOT
#       Starts ROOT/main (--postgresql, basic auth: restartable, and seeded fast with SQL) and
#       ROOT/accounts (--accounts, memory); prints `export` lines to eval: SATCHEL_KINTO_URL,
#       SATCHEL_KINTO_DIR (ROOT/main, to stop/start it), SATCHEL_KINTO_ACCOUNTS_URL and
#       SATCHEL_KINTO_SCRIPT (this script).
#   scripts/kinto.sh down ROOT
#       Stops both servers of ROOT and their PostgreSQL clusters, then removes ROOT.
set -euo pipefail

script=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
repo=$(dirname "$(dirname "$script")")
venv=${SATCHEL_KINTO_VENV:-$repo/.build-kinto/venv}
# kinto-attachment 9 needs Python 3.12; 8.0 is the newest that runs on Debian 12's Python 3.11.
requirements=('kinto[postgresql]>=26,<27' 'kinto-attachment>=8,<9')
requirement="${requirements[*]}"

say() { echo "kinto.sh: $*" >&2; }
die() { say "$*"; exit 1; }
usage() { { echo usage:; sed -n '5,28s/^#//p' "$script"; } >&2; exit 2; }

# A TCP port on 127.0.0.1 that nothing listens on right now, and a random secret.
# It is picked at random below the kernel's ephemeral range (32768 and up on Linux): a port the
# kernel hands out for port 0 may be the local port of an outgoing connection by the time the
# server binds it.
free_port() {
    python3 -c '
import random, socket
for _ in range(100):
    port = random.randrange(20000, 32000)
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        print(port)
        break
else:
    raise SystemExit("no free port between 20000 and 32000")
'
}
secret() { python3 -c 'import secrets; print(secrets.token_hex(32))'; }

# The port a config file sets (its first `port = N` line: the HTTP port in kinto.ini).
port_of() { awk '/^port = [0-9]+$/ { print $3; exit }' "$1"; }

# Closes the file descriptors above 2 that this shell inherited (bash's own 255 aside), so that the
# servers started from it do not hold them open: a caller that waits for a pipe or socket it gave
# this script to close (Foundation's Process does) would otherwise wait as long as the servers run.
close_inherited_fds() {
    local fd
    for fd in /proc/$BASHPID/fd/*; do
        fd=${fd##*/}
        if [ "$fd" -gt 2 ] && [ "$fd" -ne 255 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
}

# Runs a command with no signal blocked. A caller may start this script with signals blocked
# (threads of a Swift test process do), and a server inheriting that mask would ignore the TERM
# that `stop` sends.
unblocked() {
    python3 -c 'import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}

# Runs a PostgreSQL program (Debian's layout, newest version) as the user postgres when we are
# root: the server refuses to run as root.
pg() {
    local bin
    bin=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
    [ -d "$bin" ] || die "PostgreSQL is not installed (scripts/bootstrap.sh installs it)"
    # From /: the user postgres may not enter the caller's directory.
    if [ "$(id -u)" -eq 0 ]; then (cd / && unblocked runuser -u postgres -- "$bin/$1" "${@:2}"); else unblocked "$bin/$1" "${@:2}"; fi
}

cmd_install() {
    local marker=$venv/.satchel-requirement
    # Done when the marker (written after a successful install) matches and the venv still works.
    if [ "$(cat "$marker" 2>/dev/null)" = "$requirement" ] &&
        "$venv/bin/python" -c 'import importlib.util as u; assert u.find_spec("kinto") and u.find_spec("kinto_attachment")' 2>/dev/null; then
        return 0
    fi
    say "installing $requirement into $venv"
    if ! "$venv/bin/python" -c '' 2>/dev/null; then # missing, or its interpreter is gone
        rm -rf "$venv"
        python3 -m venv "$venv" >&2
    fi
    "$venv/bin/pip" install --quiet --disable-pip-version-check "${requirements[@]}" >&2
    echo "$requirement" >"$marker"
}

# Creates the PostgreSQL cluster of DIR on first use, starts it when it is down and creates its
# database `kinto` when missing. Its port is in DIR/pg/data/postgresql.conf, its socket in DIR/pg.
pg_up() {
    local pg=$1/pg port query="SELECT 1 FROM pg_database WHERE datname = 'kinto'"
    if [ ! -f "$pg/data/PG_VERSION" ]; then
        rm -rf "$pg" && mkdir -p "$pg"
        [ "$(id -u)" -ne 0 ] || chown postgres "$pg"
        pg initdb -D "$pg/data" -A trust -U postgres >"$pg/initdb.log" 2>&1 || {
            cat "$pg/initdb.log" >&2
            die "initdb failed in $pg (postgres must be able to reach it)"
        }
        printf "port = %s\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\n" \
            "$(free_port)" "$pg" >>"$pg/data/postgresql.conf"
    fi
    if ! pg pg_ctl -D "$pg/data" status >/dev/null 2>&1; then
        (close_inherited_fds && pg pg_ctl -D "$pg/data" -l "$pg/log" -w -s start >&2) ||
            { tail -n 20 "$pg/log" >&2; die "PostgreSQL did not start in $pg"; }
    fi
    port=$(port_of "$pg/data/postgresql.conf")
    if [ -z "$(pg psql -h 127.0.0.1 -p "$port" -U postgres -tAc "$query")" ]; then
        pg createdb -h 127.0.0.1 -p "$port" -U postgres kinto >&2
    fi
}

# Writes the config FILE of a new Kinto whose files live in DIR: ACCOUNTS is 0 or 1; PG_PORT is
# empty for the memory backend.
write_config() {
    local backend=memory url="" includes="kinto.plugins.default_bucket kinto_attachment"
    local auth="multiauth.policies = basicauth"
    if [ -n "$4" ]; then backend=postgresql url=postgresql://postgres@127.0.0.1:$4/kinto; fi
    if [ "$3" = 1 ]; then
        # The account policy alone: with basicauth after it, a wrong password would fall through
        # to basic auth and get 403 instead of 401.
        includes+=" kinto.plugins.accounts"
        auth="multiauth.policies = account"
        auth+=$'\nmultiauth.policy.account.use = kinto.plugins.accounts.AccountsPolicy'
        auth+=$'\nkinto.account_create_principals = system.Everyone'
    fi
    cat >"$1" <<EOF
[server:main]
use = egg:waitress#main
host = 127.0.0.1
port = $(free_port)

[app:main]
use = egg:kinto
kinto.includes = $includes
kinto.storage_backend = kinto.core.storage.$backend
kinto.storage_url = $url
kinto.cache_backend = kinto.core.cache.$backend
kinto.cache_url = $url
kinto.permission_backend = kinto.core.permission.$backend
kinto.permission_url = $url
$auth
kinto.bucket_create_principals = system.Authenticated
kinto.userid_hmac_secret = $(secret)
kinto.default_bucket_hmac_secret = $(secret)
# kinto-attachment: files in DIR/attachments, served by the file server at base_url. Satchel
# uploads blobs as <content hash>.bin: bin is allowed besides the plugin's default extensions.
kinto.attachment.base_path = $2/attachments
kinto.attachment.base_url = http://127.0.0.1:$(free_port)/
kinto.attachment.extensions = default+bin

[loggers]
keys = root
[handlers]
keys = console
[formatters]
keys = generic
[logger_root]
level = WARNING
handlers = console
[handler_console]
class = StreamHandler
args = (sys.stderr,)
formatter = generic
[formatter_generic]
format = %(asctime)s %(levelname)-5.5s [%(name)s] %(message)s
EOF
}

# Whether the process whose pid file is PIDFILE is alive: a live process, not a zombie, that is
# still the program WORD names.
alive() {
    local pid state cmdline
    pid=$(cat "$1" 2>/dev/null) && kill -0 "$pid" 2>/dev/null || return 1
    [ -r "/proc/$pid/stat" ] || return 0
    # A zombie has exited. A process mid-exec may show an empty command line for an instant, so
    # only a non-empty one without WORD means the pid now belongs to another program.
    state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)
    [ "$state" != Z ] || return 1
    cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)
    [ -z "$cmdline" ] || [[ $cmdline == *"$2"* ]]
}
# Whether the Kinto of DIR is alive, and whether its file server is.
running() { alive "$1/kinto.pid" kinto; }
serving() { alive "$1/files.pid" http.server; }

# The URL the file server of a config file serves attachments at (its base_url).
files_url_of() { awk '$1 == "kinto.attachment.base_url" { print $3; exit }' "$1"; }

# Starts a program in the background with its own session (away from our terminal), no stdin,
# its output appended to LOG, no signal blocked and no inherited descriptor; writes its pid to
# PIDFILE. It execs (no fork), so $! is the program itself.
launch() {
    local log=$1 pidfile=$2
    shift 2
    (close_inherited_fds && exec setsid python3 -c 'import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execv(sys.argv[1], sys.argv[1:])' "$@" </dev/null >>"$log" 2>&1) &
    echo $! >"$pidfile"
}

# Ends the process of PIDFILE (TERM, then KILL after 10 s) while CHECK DIR says it is alive.
end() {
    local check=$1 dir=$2 pidfile=$3 pid i
    if "$check" "$dir"; then
        pid=$(cat "$pidfile")
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 100; i++)); do "$check" "$dir" || break; sleep 0.1; done
        ! "$check" "$dir" || kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
}

# Whether GET URL answers 200.
answers() {
    if command -v curl >/dev/null; then
        [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$1")" = 200 ]
    else
        python3 -c 'import sys, urllib.request as u; u.urlopen(sys.argv[1], timeout=5)' "$1" 2>/dev/null
    fi
}
# Whether the Kinto at URL (its API root) is healthy: /__heartbeat__ checks its backends, the
# attachments' storage included.
healthy() { answers "$1/__heartbeat__"; }

cmd_start() {
    local dir="" accounts=0 postgresql=0 arg url files port deadline
    for arg; do
        case $arg in
            --accounts) accounts=1 ;;
            --postgresql) postgresql=1 ;;
            -*) usage ;;
            *) [ -z "$dir" ] || usage; dir=$arg ;;
        esac
    done
    [ -n "$dir" ] || usage
    cmd_install
    mkdir -p "$dir" && chmod 755 "$dir" # the user postgres must reach DIR/pg
    dir=$(cd "$dir" && pwd)
    if [ ! -f "$dir/kinto.ini" ]; then
        if [ "$postgresql" = 1 ]; then
            pg_up "$dir"
            write_config "$dir/new.ini" "$dir" "$accounts" "$(port_of "$dir/pg/data/postgresql.conf")"
            say "creating Kinto's schema in PostgreSQL"
            "$venv/bin/kinto" migrate --ini "$dir/new.ini" >>"$dir/kinto.log" 2>&1 ||
                { tail -n 30 "$dir/kinto.log" >&2; die "kinto migrate failed in $dir"; }
        else
            write_config "$dir/new.ini" "$dir" "$accounts" ""
        fi
        mv "$dir/new.ini" "$dir/kinto.ini" # only now, so that a failed first start is redone
    elif [ -d "$dir/pg" ]; then
        pg_up "$dir"
    fi
    url=http://127.0.0.1:$(port_of "$dir/kinto.ini")/v1
    files=$(files_url_of "$dir/kinto.ini")
    [ -n "$files" ] || die "$dir/kinto.ini sets no kinto.attachment.base_url (made by an older kinto.sh: remove $dir)"
    mkdir -p "$dir/attachments"
    if ! serving "$dir"; then
        # The attachments, as the plugin's base_url says (a static server: Kinto serves none).
        port=${files%/}
        launch "$dir/files.log" "$dir/files.pid" "$venv/bin/python" -m http.server "${port##*:}" \
            --bind 127.0.0.1 --directory "$dir/attachments"
    fi
    if ! running "$dir"; then launch "$dir/kinto.log" "$dir/kinto.pid" "$venv/bin/kinto" start --ini "$dir/kinto.ini"; fi
    deadline=$((SECONDS + 60))
    until healthy "$url" && answers "$files"; do
        if ! running "$dir" || ! serving "$dir" || [ "$SECONDS" -ge "$deadline" ]; then
            say "Kinto in $dir is not healthy at $url (attachments at $files); the ends of its logs:"
            tail -n 30 "$dir/kinto.log" "$dir/files.log" >&2
            cmd_stop "$dir"
            exit 1
        fi
        sleep 0.2
    done
    echo "$url"
}

cmd_stop() {
    end running "$1" "$1/kinto.pid"
    end serving "$1" "$1/files.pid"
}

# Runs psql on the database of DIR's PostgreSQL cluster (tests seed big collections with SQL).
cmd_psql() {
    local dir=$1
    [ -f "$dir/pg/data/postgresql.conf" ] || die "$dir has no PostgreSQL cluster"
    pg psql -h 127.0.0.1 -p "$(port_of "$dir/pg/data/postgresql.conf")" -U postgres -d kinto -v ON_ERROR_STOP=1 -qAt "${@:2}"
}

cmd_up() {
    local root=$1 main accounts
    mkdir -p "$root" && chmod 755 "$root"
    root=$(cd "$root" && pwd)
    main=$(bash "$script" start "$root/main" --postgresql)
    accounts=$(bash "$script" start "$root/accounts" --accounts)
    printf 'export SATCHEL_KINTO_URL=%q\n' "$main"
    printf 'export SATCHEL_KINTO_DIR=%q\n' "$root/main"
    printf 'export SATCHEL_KINTO_ACCOUNTS_URL=%q\n' "$accounts"
    printf 'export SATCHEL_KINTO_SCRIPT=%q\n' "$script"
}

cmd_down() {
    local root=$1 dir
    [ -d "$root" ] || return 0
    if [ -n "$(find "$root" -mindepth 1 -maxdepth 1 ! -name main ! -name accounts -print -quit)" ]; then
        die "not removing $root: it holds more than main/ and accounts/"
    fi
    for dir in "$root/main" "$root/accounts"; do
        cmd_stop "$dir"
        if [ -f "$dir/pg/data/PG_VERSION" ] && pg pg_ctl -D "$dir/pg/data" status >/dev/null 2>&1; then
            pg pg_ctl -D "$dir/pg/data" -m fast -w -s stop >&2
        fi
    done
    rm -rf "$root"
}

[ $# -ge 1 ] || usage
command=$1
shift
case $command in
    install) [ $# -eq 0 ] || usage; cmd_install ;;
    start) cmd_start "$@" ;;
    stop | up | down) [ $# -eq 1 ] || usage; "cmd_$command" "$1" ;;
    psql) [ $# -ge 1 ] || usage; cmd_psql "$@" ;;
    *) usage ;;
esac
