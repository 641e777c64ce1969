// An Env that encrypts every file LevelDB writes: see CLevelDBEncryption.h.
//
// Each file starts with a 64-byte header (magic "SatchEnc", format version 1 as a little-endian
// 32-bit integer, 4 bytes of flags, the 16-byte id of the key, the 16-byte initial counter, 16
// zero bytes), followed by the file's bytes under AES-256-CTR: byte i of the content is XORed
// with byte i of the key stream that starts at the initial counter. LevelDB only ever appends
// to a file it writes, and a file written again (CURRENT, a new log) is a new file with a new
// random counter, so no key stream is ever used twice.
//
// The C API cannot take a custom Env directly: `leveldb_options_set_env` takes a
// `leveldb_env_t`, which db/c.cc defines as `{ Env* rep; bool is_default; }` and c.h leaves
// opaque. This file defines the same struct so that an Env of its own reaches a database opened
// through the C API (LevelDB 1.23, the layout unchanged since the C API was added).
#include "CLevelDBEncryption.h"

#include <leveldb/env.h>
#include <leveldb/slice.h>
#include <leveldb/status.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdarg>
#include <cstring>
#include <memory>
#include <string>

struct leveldb_env_t {
    leveldb::Env *rep;
    bool is_default;
};

namespace {

constexpr char kMagic[8] = {'S', 'a', 't', 'c', 'h', 'E', 'n', 'c'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderSize = SATCHEL_FILE_HEADER_SIZE;

/// One AES-256-CTR key stream, positioned at a byte offset of a file's content.
class KeyStream {
  public:
    KeyStream() : context_(EVP_CIPHER_CTX_new()) {}
    ~KeyStream() { EVP_CIPHER_CTX_free(context_); }
    KeyStream(const KeyStream &) = delete;
    KeyStream &operator=(const KeyStream &) = delete;

    bool Seek(const uint8_t *key, const uint8_t *initial, uint64_t offset) {
        if (context_ == nullptr) return false;
        uint8_t counter[16];
        std::memcpy(counter, initial, 16);
        // counter += offset / 16, as a 128-bit big-endian integer.
        uint64_t blocks = offset / 16;
        unsigned carry = 0;
        for (int i = 15; i >= 0 && (blocks != 0 || carry != 0); --i) {
            unsigned sum = counter[i] + static_cast<unsigned>(blocks & 0xff) + carry;
            counter[i] = static_cast<uint8_t>(sum);
            carry = sum >> 8;
            blocks >>= 8;
        }
        if (EVP_EncryptInit_ex(context_, EVP_aes_256_ctr(), nullptr, key, counter) != 1) return false;
        size_t skip = offset % 16;
        if (skip != 0) {
            uint8_t discarded[16] = {0};
            int written = 0;
            if (EVP_EncryptUpdate(context_, discarded, &written, discarded, static_cast<int>(skip)) != 1) return false;
        }
        return true;
    }

    /// XORs `count` bytes of the stream into `out` (which may be `in`).
    bool Apply(const uint8_t *in, uint8_t *out, size_t count) {
        while (count > 0) {
            int chunk = count > (1u << 30) ? (1 << 30) : static_cast<int>(count);
            int written = 0;
            if (EVP_EncryptUpdate(context_, out, &written, in, chunk) != 1) return false;
            in += chunk;
            out += chunk;
            count -= static_cast<size_t>(chunk);
        }
        return true;
    }

  private:
    EVP_CIPHER_CTX *context_;
};

leveldb::Status CipherFailure(const std::string &name) { return leveldb::Status::IOError(name, "encryption failed (OpenSSL)"); }

/// Checks a header read from `name`: this format, this key.
leveldb::Status CheckHeader(const std::string &name, const leveldb::Slice &header, const uint8_t *key_id, uint8_t *initial_out) {
    uint8_t id[16];
    switch (satchel_read_file_header(reinterpret_cast<const uint8_t *>(header.data()), header.size(), id)) {
    case 0: break;
    case 1: return leveldb::Status::Corruption(name, "not an encrypted file (written without the store's key)");
    case 2: return leveldb::Status::Corruption(name, "shorter than an encrypted file's header");
    default: return leveldb::Status::NotSupported(name, "encrypted in a later format than this build reads");
    }
    if (std::memcmp(id, key_id, 16) != 0) return leveldb::Status::Corruption(name, "encrypted with another key (a file from another store)");
    std::memcpy(initial_out, header.data() + 32, 16);
    return leveldb::Status::OK();
}

class EncryptedSequentialFile final : public leveldb::SequentialFile {
  public:
    EncryptedSequentialFile(leveldb::SequentialFile *base, const uint8_t *key, const uint8_t *initial, bool empty)
        : base_(base), key_(key), empty_(empty) {
        std::memcpy(initial_, initial, 16);
    }

    bool Start() { return empty_ || stream_.Seek(key_, initial_, 0); }

    leveldb::Status Read(size_t n, leveldb::Slice *result, char *scratch) override {
        if (empty_) {
            *result = leveldb::Slice();
            return leveldb::Status::OK();
        }
        leveldb::Status status = base_->Read(n, result, scratch);
        if (!status.ok()) return status;
        if (!stream_.Apply(reinterpret_cast<const uint8_t *>(result->data()), reinterpret_cast<uint8_t *>(scratch), result->size())) {
            return CipherFailure("a sequential read");
        }
        offset_ += result->size();
        *result = leveldb::Slice(scratch, result->size());
        return leveldb::Status::OK();
    }

    leveldb::Status Skip(uint64_t n) override {
        if (empty_) return leveldb::Status::OK();
        leveldb::Status status = base_->Skip(n);
        if (!status.ok()) return status;
        offset_ += n;
        return stream_.Seek(key_, initial_, offset_) ? leveldb::Status::OK() : CipherFailure("a skip");
    }

  private:
    std::unique_ptr<leveldb::SequentialFile> base_;
    const uint8_t *key_;
    uint8_t initial_[16];
    bool empty_;
    uint64_t offset_ = 0;
    KeyStream stream_;
};

class EncryptedRandomAccessFile final : public leveldb::RandomAccessFile {
  public:
    EncryptedRandomAccessFile(leveldb::RandomAccessFile *base, const std::string &name, uint64_t size, const uint8_t *key, const uint8_t *initial)
        : base_(base), name_(name), size_(size), key_(key) {
        std::memcpy(initial_, initial, 16);
    }

    // Safe for concurrent use, as LevelDB requires: each read has its own key stream.
    leveldb::Status Read(uint64_t offset, size_t n, leveldb::Slice *result, char *scratch) const override {
        // A file cut short: what LevelDB's own reader would call an invalid argument.
        if (offset > size_ || n > size_ - offset) return leveldb::Status::Corruption(name_, "truncated: a read past the end of the file");
        leveldb::Status status = base_->Read(offset + kHeaderSize, n, result, scratch);
        if (!status.ok()) return status;
        KeyStream stream;
        if (!stream.Seek(key_, initial_, offset) ||
            !stream.Apply(reinterpret_cast<const uint8_t *>(result->data()), reinterpret_cast<uint8_t *>(scratch), result->size())) {
            return CipherFailure("a read");
        }
        *result = leveldb::Slice(scratch, result->size());
        return leveldb::Status::OK();
    }

  private:
    std::unique_ptr<leveldb::RandomAccessFile> base_;
    std::string name_;
    uint64_t size_;
    const uint8_t *key_;
    uint8_t initial_[16];
};

class EncryptedWritableFile final : public leveldb::WritableFile {
  public:
    EncryptedWritableFile(leveldb::WritableFile *base) : base_(base) {}

    bool Start(const uint8_t *key, const uint8_t *initial) { return stream_.Seek(key, initial, 0); }

    leveldb::Status Append(const leveldb::Slice &data) override {
        buffer_.resize(data.size());
        if (!stream_.Apply(reinterpret_cast<const uint8_t *>(data.data()), reinterpret_cast<uint8_t *>(&buffer_[0]), data.size())) {
            return CipherFailure("a write");
        }
        return base_->Append(leveldb::Slice(buffer_));
    }
    leveldb::Status Close() override { return base_->Close(); }
    leveldb::Status Flush() override { return base_->Flush(); }
    leveldb::Status Sync() override { return base_->Sync(); }

  private:
    std::unique_ptr<leveldb::WritableFile> base_;
    std::string buffer_;
    KeyStream stream_;
};

/// LevelDB's info log prints key ranges: an encrypted store keeps none.
class DiscardingLogger final : public leveldb::Logger {
  public:
    void Logv(const char *, std::va_list) override {}
};

class EncryptedEnv final : public leveldb::EnvWrapper {
  public:
    EncryptedEnv(const uint8_t *key, const uint8_t *key_id) : leveldb::EnvWrapper(leveldb::Env::Default()) {
        std::memcpy(key_, key, 32);
        std::memcpy(key_id_, key_id, 16);
        handle_.rep = this;
        handle_.is_default = false;
    }
    ~EncryptedEnv() override { OPENSSL_cleanse(key_, sizeof key_); }

    leveldb_env_t *Handle() { return &handle_; }

    leveldb::Status NewSequentialFile(const std::string &name, leveldb::SequentialFile **result) override {
        *result = nullptr;
        leveldb::SequentialFile *base = nullptr;
        leveldb::Status status = target()->NewSequentialFile(name, &base);
        if (!status.ok()) return status;
        std::unique_ptr<leveldb::SequentialFile> owned(base);
        char scratch[kHeaderSize];
        leveldb::Slice header;
        status = base->Read(kHeaderSize, &header, scratch);
        if (!status.ok()) return status;
        // A file cut short before its header was whole (a crash while LevelDB created it) holds
        // nothing yet: LevelDB reads it as empty, as it reads an empty file.
        bool empty = header.size() < kHeaderSize;
        uint8_t initial[16] = {0};
        if (!empty) {
            status = CheckHeader(name, header, key_id_, initial);
            if (!status.ok()) return status;
        }
        auto file = std::make_unique<EncryptedSequentialFile>(owned.release(), key_, initial, empty);
        if (!file->Start()) return CipherFailure(name);
        *result = file.release();
        return leveldb::Status::OK();
    }

    leveldb::Status NewRandomAccessFile(const std::string &name, leveldb::RandomAccessFile **result) override {
        *result = nullptr;
        leveldb::RandomAccessFile *base = nullptr;
        leveldb::Status status = target()->NewRandomAccessFile(name, &base);
        if (!status.ok()) return status;
        std::unique_ptr<leveldb::RandomAccessFile> owned(base);
        char scratch[kHeaderSize];
        leveldb::Slice header;
        status = base->Read(0, kHeaderSize, &header, scratch);
        if (!status.ok()) return status;
        uint8_t initial[16];
        status = CheckHeader(name, header, key_id_, initial);
        if (!status.ok()) return status;
        uint64_t size = 0;
        status = GetFileSize(name, &size);
        if (!status.ok()) return status;
        *result = new EncryptedRandomAccessFile(owned.release(), name, size, key_, initial);
        return leveldb::Status::OK();
    }

    leveldb::Status NewWritableFile(const std::string &name, leveldb::WritableFile **result) override {
        *result = nullptr;
        uint8_t header[kHeaderSize] = {0};
        std::memcpy(header, kMagic, 8);
        header[8] = static_cast<uint8_t>(kFormatVersion);
        std::memcpy(header + 16, key_id_, 16);
        if (RAND_bytes(header + 32, 16) != 1) return leveldb::Status::IOError(name, "no random bytes for the file's counter");
        leveldb::WritableFile *base = nullptr;
        leveldb::Status status = target()->NewWritableFile(name, &base);
        if (!status.ok()) return status;
        auto file = std::make_unique<EncryptedWritableFile>(base);
        status = base->Append(leveldb::Slice(reinterpret_cast<const char *>(header), kHeaderSize));
        if (!status.ok()) return status;
        if (!file->Start(key_, header + 32)) return CipherFailure(name);
        *result = file.release();
        return leveldb::Status::OK();
    }

    // Only used with `reuse_logs`, which Satchel leaves off: LevelDB then starts a new file.
    leveldb::Status NewAppendableFile(const std::string &name, leveldb::WritableFile **result) override {
        *result = nullptr;
        return leveldb::Status::NotSupported(name, "an encrypted file is never appended to");
    }

    leveldb::Status GetFileSize(const std::string &name, uint64_t *size) override {
        leveldb::Status status = target()->GetFileSize(name, size);
        if (status.ok()) *size = *size > kHeaderSize ? *size - kHeaderSize : 0;
        return status;
    }

    leveldb::Status NewLogger(const std::string &, leveldb::Logger **result) override {
        *result = new DiscardingLogger();
        return leveldb::Status::OK();
    }

  private:
    uint8_t key_[32];
    uint8_t key_id_[16];
    leveldb_env_t handle_;
};

}  // namespace

struct satchel_encrypted_env {
    EncryptedEnv env;
    satchel_encrypted_env(const uint8_t *key, const uint8_t *key_id) : env(key, key_id) {}
};

extern "C" {

satchel_encrypted_env *satchel_encrypted_env_create(const uint8_t *key, const uint8_t *key_id) {
    return new satchel_encrypted_env(key, key_id);
}

leveldb_env_t *satchel_encrypted_env_leveldb(satchel_encrypted_env *env) { return env->env.Handle(); }

void satchel_encrypted_env_destroy(satchel_encrypted_env *env) { delete env; }

int satchel_read_file_header(const uint8_t *bytes, size_t count, uint8_t *key_id_out) {
    if (count >= 8 && std::memcmp(bytes, kMagic, 8) != 0) return 1;
    if (count < kHeaderSize) return 2;
    uint32_t version = uint32_t(bytes[8]) | uint32_t(bytes[9]) << 8 | uint32_t(bytes[10]) << 16 | uint32_t(bytes[11]) << 24;
    if (version != kFormatVersion) return 3;
    std::memcpy(key_id_out, bytes + 16, 16);
    return 0;
}

int satchel_random_bytes(uint8_t *out, size_t count) { return RAND_bytes(out, static_cast<int>(count)) == 1 ? 0 : 1; }

int satchel_seal(const uint8_t *key, const uint8_t *plain, size_t count, const uint8_t *aad, size_t aad_count, uint8_t *out) {
    if (RAND_bytes(out, 12) != 1) return 1;
    EVP_CIPHER_CTX *context = EVP_CIPHER_CTX_new();
    if (context == nullptr) return 1;
    int written = 0, ok = 1;
    ok &= EVP_EncryptInit_ex(context, EVP_aes_256_gcm(), nullptr, key, out);
    if (aad_count > 0) ok &= EVP_EncryptUpdate(context, nullptr, &written, aad, static_cast<int>(aad_count));
    if (count > 0) ok &= EVP_EncryptUpdate(context, out + 12, &written, plain, static_cast<int>(count));
    ok &= EVP_EncryptFinal_ex(context, out + 12 + count, &written);
    ok &= EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, 16, out + 12 + count);
    EVP_CIPHER_CTX_free(context);
    return ok == 1 ? 0 : 1;
}

int satchel_open(const uint8_t *key, const uint8_t *sealed, size_t count, const uint8_t *aad, size_t aad_count, uint8_t *out) {
    if (count < SATCHEL_SEAL_OVERHEAD) return 1;
    size_t length = count - SATCHEL_SEAL_OVERHEAD;
    EVP_CIPHER_CTX *context = EVP_CIPHER_CTX_new();
    if (context == nullptr) return 1;
    int written = 0, ok = 1;
    ok &= EVP_DecryptInit_ex(context, EVP_aes_256_gcm(), nullptr, key, sealed);
    if (aad_count > 0) ok &= EVP_DecryptUpdate(context, nullptr, &written, aad, static_cast<int>(aad_count));
    if (length > 0) ok &= EVP_DecryptUpdate(context, out, &written, sealed + 12, static_cast<int>(length));
    uint8_t tag[16];
    std::memcpy(tag, sealed + 12 + length, 16);
    ok &= EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, 16, tag);
    if (ok == 1 && EVP_DecryptFinal_ex(context, out + length, &written) != 1) ok = 0;
    EVP_CIPHER_CTX_free(context);
    if (ok != 1) OPENSSL_cleanse(out, length);
    return ok == 1 ? 0 : 1;
}

int satchel_keyed_hash(const uint8_t *key, const uint8_t *data, size_t count, uint8_t *out) {
    unsigned int length = 0;
    static const uint8_t empty = 0;
    return HMAC(EVP_sha256(), key, 32, count > 0 ? data : &empty, count, out, &length) != nullptr && length == 32 ? 0 : 1;
}

int satchel_derive_key(const char *passphrase, size_t count, const uint8_t *salt, size_t salt_count, uint8_t *out) {
    return EVP_PBE_scrypt(passphrase, count, salt, salt_count, 1 << 15, 8, 1, 64u << 20, out, 32) == 1 ? 0 : 1;
}

}  // extern "C"
