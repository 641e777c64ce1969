// Table files an Env created that LevelDB never synced. LevelDB syncs every table before a
// version names it (a memtable's table, each output of a compaction); a close that stops a
// compaction leaves its output half written and unsynced, named by no version, until the next
// open deletes it. A repair before that open would take it for a damaged table of the store's
// and report its records lost. The Env notes each table it creates and each sync of one, and the
// database's owner removes the unsynced ones once the database is closed.
#ifndef SATCHEL_UNSYNCED_TABLES_H
#define SATCHEL_UNSYNCED_TABLES_H

#include <leveldb/env.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>

namespace satchel {

inline bool IsTableFileName(const std::string &name) {
    auto ends = [&](const char *suffix) {
        size_t n = std::strlen(suffix);
        return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
    };
    return ends(".ldb") || ends(".sst");
}

class UnsyncedTables {
  public:
    void Created(const std::string &name) {
        std::lock_guard<std::mutex> lock(mutex_);
        names_.insert(name);
    }

    void Synced(const std::string &name) {
        std::lock_guard<std::mutex> lock(mutex_);
        names_.erase(name);
    }

    /// Removes, through `env`, the unsynced tables in `directory` (whose database is closed), and
    /// forgets them; returns how many there were.
    int Remove(leveldb::Env *env, const std::string &directory) {
        std::lock_guard<std::mutex> lock(mutex_);
        const std::string prefix = directory + "/";
        int removed = 0;
        for (auto it = names_.begin(); it != names_.end();) {
            if (it->compare(0, prefix.size(), prefix) == 0 && it->find('/', prefix.size()) == std::string::npos) {
                env->RemoveFile(*it);
                ++removed;
                it = names_.erase(it);
            } else {
                ++it;
            }
        }
        return removed;
    }

    /// Forgets what was noted in `directory` (before a database opens there: only what its own
    /// run creates is ever removed).
    void Forget(const std::string &directory) {
        std::lock_guard<std::mutex> lock(mutex_);
        const std::string prefix = directory + "/";
        for (auto it = names_.begin(); it != names_.end();) {
            it = it->compare(0, prefix.size(), prefix) == 0 ? names_.erase(it) : std::next(it);
        }
    }

    /// `file`, created as `name`: a table comes wrapped so that its sync is noted.
    leveldb::WritableFile *Noting(const std::string &name, leveldb::WritableFile *file) {
        if (file == nullptr || !IsTableFileName(name)) return file;
        Created(name);
        return new SyncNotingFile(file, this, name);
    }

  private:
    class SyncNotingFile final : public leveldb::WritableFile {
      public:
        SyncNotingFile(leveldb::WritableFile *base, UnsyncedTables *tables, std::string name)
            : base_(base), tables_(tables), name_(std::move(name)) {}
        leveldb::Status Append(const leveldb::Slice &data) override { return base_->Append(data); }
        leveldb::Status Close() override { return base_->Close(); }
        leveldb::Status Flush() override { return base_->Flush(); }
        leveldb::Status Sync() override {
            leveldb::Status status = base_->Sync();
            if (status.ok()) tables_->Synced(name_);
            return status;
        }

      private:
        std::unique_ptr<leveldb::WritableFile> base_;
        UnsyncedTables *tables_;
        std::string name_;
    };

    std::mutex mutex_;
    std::set<std::string> names_;
};

}  // namespace satchel

#endif
