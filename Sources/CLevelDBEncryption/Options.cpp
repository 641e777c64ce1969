// LevelDB options its C API does not reach.
#include "CLevelDBEncryption.h"
#include "UnsyncedTables.h"

#include <leveldb/env.h>
#include <leveldb/options.h>

#include <atomic>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

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

namespace {
/// LevelDB's default Env, but for two things. While refusing tables, it creates no table file
/// (a repair's reads: a compaction then fails rather than copy blocks it read unverified). While
/// armed, the directory listing it takes first
/// (an open's recovery, which checks every live file is there) is kept, and served to the next
/// listing of that directory (the same open's removal of obsolete files) instead of reading the
/// directory again — a file per table, two listings per open. A kept listing lacks only the files
/// made after it (the open's new log and MANIFEST, a table its recovery wrote), which are live;
/// what the removal deletes is decided by liveness, so it deletes nothing a fresh listing would
/// have kept. After the second listing, or when disarmed, every listing reads the directory.
class OpenListingEnv final : public leveldb::EnvWrapper {
  public:
    OpenListingEnv() : leveldb::EnvWrapper(leveldb::Env::Default()) {}

    leveldb::Status GetChildren(const std::string &directory, std::vector<std::string> *result) override {
        std::lock_guard<std::mutex> lock(mutex_);
        if (state_ == State::serving && directory == directory_) {
            state_ = State::off;
            *result = std::move(names_);
            names_.clear();
            return leveldb::Status::OK();
        }
        leveldb::Status status = target()->GetChildren(directory, result);
        if (state_ == State::keeping) {
            state_ = status.ok() ? State::serving : State::off;
            if (status.ok()) {
                directory_ = directory;
                names_ = *result;
            }
        }
        return status;
    }

    leveldb::Status NewWritableFile(const std::string &name, leveldb::WritableFile **result) override {
        if (refusingTables_.load() && (EndsWith(name, ".ldb") || EndsWith(name, ".sst"))) {
            *result = nullptr;
            return leveldb::Status::IOError(name, "no table is written while the repair reads the database");
        }
        leveldb::Status status = target()->NewWritableFile(name, result);
        if (status.ok()) *result = unsynced_.Noting(name, *result);
        return status;
    }

    satchel::UnsyncedTables &Unsynced() { return unsynced_; }

    void RefuseTables(bool refuse) { refusingTables_.store(refuse); }

    void Arm(bool armed) {
        std::lock_guard<std::mutex> lock(mutex_);
        state_ = armed ? State::keeping : State::off;
        names_.clear();
    }

  private:
    static bool EndsWith(const std::string &name, const char *suffix) {
        size_t n = std::strlen(suffix);
        return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
    }

    enum class State { keeping, serving, off };
    satchel::UnsyncedTables unsynced_;
    std::atomic<bool> refusingTables_{false};
    std::mutex mutex_;
    State state_ = State::off;
    std::string directory_;
    std::vector<std::string> names_;
};
}  // namespace

struct satchel_open_listing_env {
    OpenListingEnv env;
};

extern "C" satchel_open_listing_env *satchel_open_listing_env_create(void) { return new satchel_open_listing_env(); }

extern "C" void satchel_leveldb_options_set_open_listing_env(leveldb_options_t *options, satchel_open_listing_env *env) {
    options->rep.env = &env->env;
}

extern "C" void satchel_open_listing_env_arm(satchel_open_listing_env *env, int armed) { env->env.Arm(armed != 0); }

extern "C" void satchel_open_listing_env_refuse_tables(satchel_open_listing_env *env, int refuse) { env->env.RefuseTables(refuse != 0); }

extern "C" int satchel_open_listing_env_remove_unsynced_tables(satchel_open_listing_env *env, const char *directory) {
    return env->env.Unsynced().Remove(leveldb::Env::Default(), directory);
}

extern "C" void satchel_open_listing_env_destroy(satchel_open_listing_env *env) { delete env; }

struct satchel_database_lock {
    leveldb::FileLock *lock;
};

extern "C" satchel_database_lock *satchel_database_lock_take(const char *directory, char **errptr) {
    leveldb::FileLock *lock = nullptr;
    leveldb::Status status = leveldb::Env::Default()->LockFile(std::string(directory) + "/LOCK", &lock);
    if (!status.ok()) {
        *errptr = strdup(status.ToString().c_str());
        return nullptr;
    }
    return new satchel_database_lock{lock};
}

extern "C" void satchel_database_lock_release(satchel_database_lock *lock) {
    leveldb::Env::Default()->UnlockFile(lock->lock);
    delete lock;
}
