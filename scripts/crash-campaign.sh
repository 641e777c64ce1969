#!/usr/bin/env bash
# The crash campaign: kills the satchel executable with SIGKILL at random moments of an import
# (200,000 objects), a transaction writer (20,000 objects a transaction), a pull (100,000
# objects from the in-memory server kept in a file), a push (5,000 local changes to the loopback
# RhoConnect server), an index build (200,000 objects), a migration (100,000 objects), a
# backup (100,000 objects) and encrypt / rekey / decrypt (50,000 objects), and checks the store after every kill (satchel check, every object
# whole, nothing acknowledged lost, nothing pushed twice, the next run converging; each migrated
# object before or after the migration, read underneath Satchel; a backup's source untouched and
# its unfinished copy refused). Then it damages stores (bytes flipped in tables and in their first blocks, a log
# cut short, MANIFEST or CURRENT gone), repairs each with satchel repair, and checks that every
# object left is as written and every indexed count equals a scan's. See docs/RELIABILITY.md.
#
#   bash scripts/crash-campaign.sh            the full campaign: 50 kills per scenario, a release
#                                             build (17 minutes on a quiet 2-core machine, 55
#                                             with benchmarks running beside it)
#   bash scripts/crash-campaign.sh --short    a few kills per scenario at a quarter of the sizes,
#                                             on the debug build (CI runs this; a few minutes)
#
# Extra arguments go to the campaign (--kills N, --scale F, --seed S, --work DIR, scenarios).
# Prints one line per scenario and a total; exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=full
if [ "${1:-}" = "--short" ]; then mode=short; shift; fi
if [ "${1:-}" = "--full" ]; then shift; fi

bash scripts/bootstrap.sh
if [ "$mode" = short ]; then
    swift build --product CrashCampaign >/dev/null
    swift build --product satchel >/dev/null
    bin=.build/debug
    set -- --kills 3 --scale 0.25 "$@"
else
    swift build -c release --product CrashCampaign >/dev/null
    swift build -c release --product satchel >/dev/null
    bin=.build/release
    set -- --kills 50 "$@"
fi
echo "crash campaign ($mode): $bin/CrashCampaign $*"
"$bin/CrashCampaign" --satchel "$bin/satchel" "$@"
