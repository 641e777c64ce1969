// The whole C seam of Satchel: LevelDB's C API, from Debian's libleveldb-dev.
// Debian ships no pkg-config file for LevelDB, so the module map links `leveldb` directly.
#include <leveldb/c.h>
