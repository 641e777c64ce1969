// LevelDB options its C API does not reach.
#include "CLevelDBEncryption.h"

#include <leveldb/options.h>

// The definition libleveldb's C API (`db/c.cc`) gives the handle `leveldb_options_create` returns:
// the C++ options, alone. Declared here so one option the C API lacks can be set on it.
struct leveldb_options_t {
    leveldb::Options rep;
};

extern "C" void satchel_leveldb_options_set_reuse_logs(leveldb_options_t *options, int reuse) { options->rep.reuse_logs = reuse != 0; }
