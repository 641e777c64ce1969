// LevelDB options its C API does not reach.
#include "CLevelDBEncryption.h"

#include <leveldb/env.h>
#include <leveldb/options.h>

#include <cstdarg>

// The definition libleveldb's C API (`db/c.cc`) gives the handle `leveldb_options_create` returns:
// the C++ options, alone. Declared here so that the options the C API lacks can be set on it.
struct leveldb_options_t {
    leveldb::Options rep;
};

extern "C" void satchel_leveldb_options_set_reuse_logs(leveldb_options_t *options, int reuse) { options->rep.reuse_logs = reuse != 0; }

namespace {
/// LevelDB's info log, kept nowhere: without one, every open renames the `LOG` file to `LOG.old`
/// and creates a new one.
class SilentLogger final : public leveldb::Logger {
  public:
    void Logv(const char *, std::va_list) override {}
};
}  // namespace

extern "C" void satchel_leveldb_options_discard_info_log(leveldb_options_t *options) {
    // Stateless and never freed: a database's background thread may log until it is closed.
    static SilentLogger *const logger = new SilentLogger();
    options->rep.info_log = logger;
}
