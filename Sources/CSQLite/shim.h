// SQLite's C API from Debian's libsqlite3-dev, for satchel-bench's baselines only.
#include <sqlite3.h>
