// SQLite's C API from Debian's libsqlite3-dev: the RhoConnect adapter reads bulk-data files with it
// (and writes them in its test server); satchel-bench runs its baselines on it.
#include <sqlite3.h>
