// The whole C seam of Satchel: LevelDB's C API, from Debian's libleveldb-dev, and the one file
// system call Swift's C library modules do not show (an atomic exchange of two paths, for
// restoring a store).
// Debian ships no pkg-config file for LevelDB, so the module map links `leveldb` directly.
#include <leveldb/c.h>
#include <fcntl.h>
#include <stdio.h>

#if defined(__APPLE__)
// renamex_np(2) with RENAME_SWAP, from <stdio.h>.
static inline int satchel_exchange_paths(const char *a, const char *b) { return renamex_np(a, b, RENAME_SWAP); }
#elif defined(__linux__)
// renameat2(2) with RENAME_EXCHANGE (Linux 3.15, glibc 2.28); glibc declares it only under
// _GNU_SOURCE, which the module's other headers may already have been read without.
int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags);
static inline int satchel_exchange_paths(const char *a, const char *b) { return renameat2(AT_FDCWD, a, AT_FDCWD, b, 1u << 1); }
#endif
