#!/usr/bin/env bash
# Installs the system libraries Satchel builds against, when missing (Debian/Ubuntu): the LevelDB
# and Snappy headers, OpenSSL's (encryption at rest), SQLite's (RhoConnect bulk-data files, the benchmark's baselines) and zlib's
# (unzipping bulk-data files); for the Kinto adapter's test servers (scripts/kinto.sh), a Python
# that can make a venv with pip and PostgreSQL's server programs. Safe to run again: it installs
# nothing that is already there. Uses sudo when not run as root.
set -euo pipefail

packages=(libleveldb-dev libsnappy-dev libsqlite3-dev zlib1g-dev libssl-dev)
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then packages+=(python3-venv); fi
if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then packages+=(postgresql); fi
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
