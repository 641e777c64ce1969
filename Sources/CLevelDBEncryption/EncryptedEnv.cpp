// An Env that encrypts every file LevelDB writes: see CLevelDBEncryption.h.
//
// Each file starts with a 64-byte header: magic "SatchEnc", format version (4 bytes,
// little-endian: 2 for a framed file with checked lengths, which earlier builds cannot read, 1
// for every other), flags (4 bytes: bit 0 tamper-evident, bit 1 chunked, bit 2 checked frame
// lengths), the 16-byte id of the key, 16 random bytes (the file's initial counter, or what its
// own key derives from), 16 zero bytes. What follows depends on the flags:
//
// - Not tamper-evident: the file's bytes under AES-256-CTR, byte i XORed with byte i of the key
//   stream that starts at the initial counter. LevelDB only ever appends to a file it writes,
//   and a file written again (CURRENT, a new log) is a new file with a new random counter, so
//   no key stream is ever used twice.
// - Tamper-evident, chunked (tables, which LevelDB reads at any offset): the bytes in chunks of
//   4,096, each sealed with AES-256-GCM and followed by its 16-byte tag; the last chunk (0 to
//   4,096 bytes) is sealed as the last, so that a file cut at a chunk boundary fails too.
// - Tamper-evident, framed (logs, MANIFEST, CURRENT: read front to back): one frame per flush,
//   a 4-byte little-endian length, the length's own tag (16 bytes: AES-256-GCM of nothing, the
//   length its additional data), the sealed bytes, the tag. A frame cut short at the end is the
//   end of the file (a crash leaves one), as LevelDB reads a log whose last write was cut; a
//   whole length whose tag fails is tampering, so that a changed length cannot pass for a frame
//   cut short and end the file early. Files written before bit 2 existed have no length tags.
//
// Sealed chunks and frames use a key of the file's own (HMAC-SHA-256 of its 16 random bytes
// under the data key) and the chunk's or frame's number as nonce, so no nonce repeats under a
// key; a chunk moved within its file, or between files, does not open.
//
// The C API cannot take a custom Env directly: `leveldb_options_set_env` takes a
// `leveldb_env_t`, which db/c.cc defines as `{ Env* rep; bool is_default; }` and c.h leaves
// opaque. This file defines the same struct so that an Env of its own reaches a database opened
// through the C API (LevelDB 1.23, the layout unchanged since the C API was added).
#include "CLevelDBEncryption.h"
#include "UnsyncedTables.h"

#include <leveldb/env.h>
#include <leveldb/slice.h>
#include <leveldb/status.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
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
/// The version of a file whose frames' lengths carry tags (flag bit 2): earlier builds refuse
/// it as a later format rather than misread it.
constexpr uint32_t kCheckedLengthsVersion = 2;
constexpr size_t kHeaderSize = SATCHEL_FILE_HEADER_SIZE;
constexpr uint32_t kTamperEvident = 1;
constexpr uint32_t kChunked = 2;
constexpr uint32_t kCheckedLengths = 4;
constexpr size_t kChunk = 4096;
constexpr size_t kTag = 16;
constexpr uint32_t kMaximumFrame = 1u << 30;

uint32_t ReadLittle32(const uint8_t *bytes) {
    return uint32_t(bytes[0]) | uint32_t(bytes[1]) << 8 | uint32_t(bytes[2]) << 16 | uint32_t(bytes[3]) << 24;
}

void WriteLittle32(uint8_t *bytes, uint32_t value) {
    for (int i = 0; i < 4; ++i) bytes[i] = static_cast<uint8_t>(value >> (8 * i));
}

/// The key a tamper-evident file's chunks or frames are sealed with: HMAC-SHA-256 of the
/// file's 16 random bytes under the data key.
bool FileKey(const uint8_t *data_key, const uint8_t *random, uint8_t *out) {
    static const char kLabel[] = "satchel file key";
    uint8_t message[sizeof kLabel - 1 + 16];
    std::memcpy(message, kLabel, sizeof kLabel - 1);
    std::memcpy(message + sizeof kLabel - 1, random, 16);
    return satchel_keyed_hash(data_key, message, sizeof message, out) == 0;
}

/// The ciphers, fetched from OpenSSL's provider once (OpenSSL 3 looks a cipher up again on
/// every initialisation given the legacy `EVP_aes_256_gcm()`).
const EVP_CIPHER *GcmCipher() {
    static const EVP_CIPHER *cipher = [] {
        const EVP_CIPHER *fetched = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
        return fetched != nullptr ? fetched : EVP_aes_256_gcm();
    }();
    return cipher;
}

/// AES-256-GCM of one chunk or frame under a file's key: the nonce is its number, and `aad`
/// says what it is (a chunk, the last chunk, a frame with its length). The key schedule is set
/// once per key and direction, then only the nonce changes.
class Sealer {
  public:
    Sealer() : context_(EVP_CIPHER_CTX_new()) {}
    ~Sealer() {
        EVP_CIPHER_CTX_free(context_);
        OPENSSL_cleanse(key_, sizeof key_);
    }
    Sealer(const Sealer &) = delete;
    Sealer &operator=(const Sealer &) = delete;

    bool Seal(const uint8_t *key, uint32_t number, const uint8_t *aad, size_t aad_count, const uint8_t *in, size_t count, uint8_t *out) {
        uint8_t nonce[12];
        Nonce(number, nonce);
        return Seal(key, nonce, aad, aad_count, in, count, out);
    }

    /// Opens `count` bytes followed by their tag into `out`; false when they do not open.
    bool Open(const uint8_t *key, uint32_t number, const uint8_t *aad, size_t aad_count, const uint8_t *in, size_t count, uint8_t *out) {
        uint8_t nonce[12];
        Nonce(number, nonce);
        return Open(key, nonce, aad, aad_count, in, count, out);
    }

    /// Seals `count` bytes into `out` followed by their tag, with a 12-byte `nonce`.
    bool Seal(const uint8_t *key, const uint8_t *nonce, const uint8_t *aad, size_t aad_count, const uint8_t *in, size_t count, uint8_t *out) {
        int written = 0, ok = 1;
        ok &= Start(key, true, nonce);
        if (aad_count > 0) ok &= EVP_EncryptUpdate(context_, nullptr, &written, aad, static_cast<int>(aad_count));
        if (count > 0) ok &= EVP_EncryptUpdate(context_, out, &written, in, static_cast<int>(count));
        ok &= EVP_EncryptFinal_ex(context_, out + count, &written);
        ok &= EVP_CIPHER_CTX_ctrl(context_, EVP_CTRL_GCM_GET_TAG, kTag, out + count);
        return ok == 1;
    }

    /// Opens what ``Seal`` wrote with `nonce`; false (and `out` cleared) when it does not open.
    bool Open(const uint8_t *key, const uint8_t *nonce, const uint8_t *aad, size_t aad_count, const uint8_t *in, size_t count, uint8_t *out) {
        uint8_t tag[kTag];
        std::memcpy(tag, in + count, kTag);
        int written = 0, ok = 1;
        ok &= Start(key, false, nonce);
        if (aad_count > 0) ok &= EVP_DecryptUpdate(context_, nullptr, &written, aad, static_cast<int>(aad_count));
        if (count > 0) ok &= EVP_DecryptUpdate(context_, out, &written, in, static_cast<int>(count));
        ok &= EVP_CIPHER_CTX_ctrl(context_, EVP_CTRL_GCM_SET_TAG, kTag, tag);
        if (ok == 1 && EVP_DecryptFinal_ex(context_, out + count, &written) == 1) return true;
        OPENSSL_cleanse(out, count);
        return false;
    }

  private:
    // The key is compared by value: a sealer a thread keeps outlives the files it served.
    int Start(const uint8_t *key, bool encrypt, const uint8_t *nonce) {
        if (!ready_ || encrypt != encrypt_ || std::memcmp(key, key_, sizeof key_) != 0) {
            int ok = encrypt ? EVP_EncryptInit_ex(context_, GcmCipher(), nullptr, key, nonce)
                             : EVP_DecryptInit_ex(context_, GcmCipher(), nullptr, key, nonce);
            ready_ = ok == 1;
            std::memcpy(key_, key, sizeof key_);
            encrypt_ = encrypt;
            return ok;
        }
        return encrypt ? EVP_EncryptInit_ex(context_, nullptr, nullptr, nullptr, nonce) : EVP_DecryptInit_ex(context_, nullptr, nullptr, nullptr, nonce);
    }

  public:
    /// The nonce of chunk or frame `number`: 8 zero bytes, then the number.
    static void Nonce(uint32_t number, uint8_t *nonce) {
        std::memset(nonce, 0, 8);
        WriteLittle32(nonce + 8, number);
    }
    /// The nonce of the length of frame `number`: 1, 7 zero bytes, then the number (never a
    /// chunk's or frame's).
    static void LengthNonce(uint32_t number, uint8_t *nonce) {
        Nonce(number, nonce);
        nonce[0] = 1;
    }

  private:
    EVP_CIPHER_CTX *context_;
    uint8_t key_[32] = {0};
    bool encrypt_ = false;
    bool ready_ = false;
};

constexpr uint8_t kChunkAad[1] = {'c'};
constexpr uint8_t kLastChunkAad[1] = {'l'};

leveldb::Status Tampered(const std::string &name) {
    return leveldb::Status::Corruption(name, "fails its authentication: damaged or changed (or written with another key)");
}

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
leveldb::Status CheckHeader(
    const std::string &name, const leveldb::Slice &header, const uint8_t *key_id, bool tamper_evident, uint8_t *initial_out, uint32_t *flags_out) {
    uint8_t id[16];
    switch (satchel_read_file_header(reinterpret_cast<const uint8_t *>(header.data()), header.size(), id)) {
    case 0: break;
    case 1: return leveldb::Status::Corruption(name, "not an encrypted file (written without the store's key)");
    case 2: return leveldb::Status::Corruption(name, "shorter than an encrypted file's header");
    // A later format, or a header damaged there (one flipped bit reads so): repair tells.
    default: return leveldb::Status::NotSupported(name, "encrypted in a later format than this build reads, or its header is damaged (satchel check; satchel repair)");
    }
    if (std::memcmp(id, key_id, 16) != 0) return leveldb::Status::Corruption(name, "encrypted with another key (a file from another store)");
    uint32_t flags = ReadLittle32(reinterpret_cast<const uint8_t *>(header.data()) + 12);
    bool known = (flags & ~(kTamperEvident | kChunked | kCheckedLengths)) == 0;
    bool plain = (flags & kTamperEvident) == 0;
    bool checked = (flags & kCheckedLengths) != 0;
    bool version2 = ReadLittle32(reinterpret_cast<const uint8_t *>(header.data()) + 8) == kCheckedLengthsVersion;
    bool consistent = (plain ? flags == 0 : (flags & kChunked) == 0 || !checked) && checked == version2;
    if (!known || !consistent) return leveldb::Status::Corruption(name, "a header whose flags are unknown or disagree with its format version");
    if (plain == tamper_evident) {
        return leveldb::Status::Corruption(name, tamper_evident ? "not tamper-evident, in a store whose files all are" : "tamper-evident, in a store whose files are not");
    }
    std::memcpy(initial_out, header.data() + 32, 16);
    *flags_out = flags;
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

/// A tamper-evident table being written: chunks of kChunk bytes, each sealed as it fills; the
/// last (possibly empty) sealed as the last when the file is synced or closed. A table is
/// synced once, when it is whole; an append after that is refused.
class ChunkedWritableFile final : public leveldb::WritableFile {
  public:
    ChunkedWritableFile(leveldb::WritableFile *base, const std::string &name, const uint8_t *key) : base_(base), name_(name) {
        std::memcpy(key_, key, 32);
    }
    ~ChunkedWritableFile() override { OPENSSL_cleanse(key_, sizeof key_); }

    leveldb::Status Append(const leveldb::Slice &data) override {
        if (finished_) return leveldb::Status::IOError(name_, "an append after the table was finished");
        const char *bytes = data.data();
        size_t count = data.size();
        while (count > 0) {
            // A full chunk is sealed only once a byte follows it: the last chunk is sealed apart.
            if (pending_.size() == kChunk) {
                leveldb::Status status = Emit(false);
                if (!status.ok()) return status;
            }
            size_t take = std::min(count, kChunk - pending_.size());
            pending_.append(bytes, take);
            bytes += take;
            count -= take;
        }
        return leveldb::Status::OK();
    }
    leveldb::Status Flush() override { return base_->Flush(); }
    leveldb::Status Sync() override {
        leveldb::Status status = Finish();
        return status.ok() ? base_->Sync() : status;
    }
    leveldb::Status Close() override {
        leveldb::Status status = Finish();
        leveldb::Status closed = base_->Close();
        return status.ok() ? closed : status;
    }

  private:
    leveldb::Status Finish() {
        if (finished_) return leveldb::Status::OK();
        finished_ = true;
        return Emit(true);
    }

    leveldb::Status Emit(bool last) {
        sealed_.resize(pending_.size() + kTag);
        if (!sealer_.Seal(
                key_, number_, last ? kLastChunkAad : kChunkAad, 1, reinterpret_cast<const uint8_t *>(pending_.data()), pending_.size(),
                reinterpret_cast<uint8_t *>(&sealed_[0]))) {
            return CipherFailure(name_);
        }
        ++number_;
        pending_.clear();
        return base_->Append(leveldb::Slice(sealed_));
    }

    std::unique_ptr<leveldb::WritableFile> base_;
    std::string name_;
    uint8_t key_[32];
    std::string pending_;
    std::string sealed_;
    uint32_t number_ = 0;
    bool finished_ = false;
    Sealer sealer_;
};

/// Where the chunks of a tamper-evident table of `stored` bytes (after its header) end: its
/// length in bytes, and the number of its last chunk. False when no whole last chunk fits.
bool ChunkedLength(uint64_t stored, uint64_t *length, uint64_t *last) {
    uint64_t whole = stored / (kChunk + kTag), rest = stored % (kChunk + kTag);
    if (rest == 0) {
        if (whole == 0) return false;
        *length = whole * kChunk;
        *last = whole - 1;
        return true;
    }
    if (rest < kTag) return false;
    *length = whole * kChunk + (rest - kTag);
    *last = whole;
    return true;
}

class ChunkedRandomAccessFile final : public leveldb::RandomAccessFile {
  public:
    ChunkedRandomAccessFile(leveldb::RandomAccessFile *base, const std::string &name, uint64_t stored, const uint8_t *key)
        : base_(base), name_(name) {
        std::memcpy(key_, key, 32);
        whole_ = ChunkedLength(stored, &length_, &last_);
    }
    ~ChunkedRandomAccessFile() override { OPENSSL_cleanse(key_, sizeof key_); }

    // Safe for concurrent use, as LevelDB requires: each read has its own buffers and sealer.
    leveldb::Status Read(uint64_t offset, size_t n, leveldb::Slice *result, char *scratch) const override {
        if (!whole_) return Tampered(name_);
        if (offset > length_ || n > length_ - offset) return leveldb::Status::Corruption(name_, "truncated: a read past the end of the file");
        if (n == 0) {
            *result = leveldb::Slice(scratch, 0);
            return leveldb::Status::OK();
        }
        uint64_t first = offset / kChunk, end = (offset + n - 1) / kChunk;
        uint64_t start = kHeaderSize + first * (kChunk + kTag);
        uint64_t stop = kHeaderSize + end * (kChunk + kTag) + ChunkBytes(end) + kTag;
        // Buffers and a sealer per thread: reads run concurrently, and each reuses its own.
        thread_local std::string stored;
        thread_local std::string plain(kChunk, '\0');
        thread_local Sealer sealer;
        stored.resize(stop - start);
        leveldb::Slice read;
        leveldb::Status status = base_->Read(start, stop - start, &read, &stored[0]);
        if (!status.ok()) return status;
        if (read.size() != stop - start) return leveldb::Status::Corruption(name_, "truncated: a chunk cut short");
        const uint8_t *in = reinterpret_cast<const uint8_t *>(read.data());
        size_t copied = 0;
        for (uint64_t chunk = first; chunk <= end; ++chunk) {
            size_t bytes = ChunkBytes(chunk);
            uint8_t *out = reinterpret_cast<uint8_t *>(&plain[0]);
            if (!sealer.Open(key_, static_cast<uint32_t>(chunk), chunk == last_ ? kLastChunkAad : kChunkAad, 1, in, bytes, out)) {
                return Tampered(name_);
            }
            uint64_t from = chunk == first ? offset % kChunk : 0;
            size_t take = static_cast<size_t>(std::min<uint64_t>(bytes - from, n - copied));
            std::memcpy(scratch + copied, out + from, take);
            copied += take;
            in += bytes + kTag;
        }
        *result = leveldb::Slice(scratch, n);
        return leveldb::Status::OK();
    }

    uint64_t Length() const { return length_; }

  private:
    size_t ChunkBytes(uint64_t chunk) const { return chunk == last_ ? static_cast<size_t>(length_ - last_ * kChunk) : kChunk; }

    std::unique_ptr<leveldb::RandomAccessFile> base_;
    std::string name_;
    uint8_t key_[32];
    bool whole_ = false;
    uint64_t length_ = 0;
    uint64_t last_ = 0;
};

/// A tamper-evident log, MANIFEST or CURRENT being written: what each flush carries, sealed as
/// one frame.
class FramedWritableFile final : public leveldb::WritableFile {
  public:
    /// Bytes in front of each frame's sealed bytes: the length and its tag.
    static constexpr size_t kFrameHead = 4 + kTag;

    FramedWritableFile(leveldb::WritableFile *base, const std::string &name, const uint8_t *key) : base_(base), name_(name) {
        std::memcpy(key_, key, 32);
    }
    ~FramedWritableFile() override { OPENSSL_cleanse(key_, sizeof key_); }

    leveldb::Status Append(const leveldb::Slice &data) override {
        pending_.append(data.data(), data.size());
        if (pending_.size() >= (1u << 20)) return Emit();
        return leveldb::Status::OK();
    }
    leveldb::Status Flush() override {
        leveldb::Status status = Emit();
        return status.ok() ? base_->Flush() : status;
    }
    leveldb::Status Sync() override {
        leveldb::Status status = Emit();
        return status.ok() ? base_->Sync() : status;
    }
    leveldb::Status Close() override {
        leveldb::Status status = Emit();
        leveldb::Status closed = base_->Close();
        return status.ok() ? closed : status;
    }

  private:
    leveldb::Status Emit() {
        if (pending_.empty()) return leveldb::Status::OK();
        if (number_ == UINT32_MAX) return leveldb::Status::IOError(name_, "too many frames in one file");
        frame_.resize(kFrameHead + pending_.size() + kTag);
        uint8_t *out = reinterpret_cast<uint8_t *>(&frame_[0]);
        WriteLittle32(out, static_cast<uint32_t>(pending_.size()));
        uint8_t nonce[12];
        Sealer::LengthNonce(number_, nonce);
        if (!sealer_.Seal(key_, nonce, out, 4, nullptr, 0, out + 4) ||
            !sealer_.Seal(key_, number_, out, 4, reinterpret_cast<const uint8_t *>(pending_.data()), pending_.size(), out + kFrameHead)) {
            return CipherFailure(name_);
        }
        ++number_;
        pending_.clear();
        return base_->Append(leveldb::Slice(frame_));
    }

    std::unique_ptr<leveldb::WritableFile> base_;
    std::string name_;
    uint8_t key_[32];
    std::string pending_;
    std::string frame_;
    uint32_t number_ = 0;
    Sealer sealer_;
};

class FramedSequentialFile final : public leveldb::SequentialFile {
  public:
    /// `checked`: the frames' lengths carry tags (flag bit 2). `salvaging` (a log read by a
    /// repair): a whole frame whose length opens and whose bytes do not is read as a damaged
    /// block of the log, and the frames after it as they are (see `Damaged`).
    FramedSequentialFile(leveldb::SequentialFile *base, const std::string &name, const uint8_t *key, bool checked, bool salvaging)
        : base_(base), name_(name), checked_(checked), salvaging_(salvaging && checked) {
        std::memcpy(key_, key, 32);
    }
    ~FramedSequentialFile() override { OPENSSL_cleanse(key_, sizeof key_); }

    // As many bytes as asked, across frames, until the file ends: LevelDB's log reader takes
    // a short read for the end of the file.
    leveldb::Status Read(size_t n, leveldb::Slice *result, char *scratch) override {
        size_t copied = 0;
        while (copied < n) {
            if (position_ == plain_.size()) {
                if (ended_) break;
                leveldb::Status status = NextFrame();
                if (!status.ok()) return status;
                continue;
            }
            size_t take = std::min(n - copied, plain_.size() - position_);
            std::memcpy(scratch + copied, plain_.data() + position_, take);
            position_ += take;
            copied += take;
        }
        *result = leveldb::Slice(scratch, copied);
        return leveldb::Status::OK();
    }

    leveldb::Status Skip(uint64_t n) override {
        while (n > 0) {
            if (position_ == plain_.size()) {
                if (ended_) return leveldb::Status::OK();
                leveldb::Status status = NextFrame();
                if (!status.ok()) return status;
                continue;
            }
            size_t take = static_cast<size_t>(std::min<uint64_t>(n, plain_.size() - position_));
            position_ += take;
            n -= take;
        }
        return leveldb::Status::OK();
    }

  private:
    /// Reads `count` bytes; false when the file ends first.
    leveldb::Status ReadExactly(size_t count, std::string *out, bool *whole) {
        out->resize(count);
        size_t got = 0;
        while (got < count) {
            leveldb::Slice read;
            leveldb::Status status = base_->Read(count - got, &read, &(*out)[got]);
            if (!status.ok()) return status;
            if (read.empty()) break;
            if (read.data() != &(*out)[got]) std::memmove(&(*out)[got], read.data(), read.size());
            got += read.size();
        }
        *whole = got == count;
        return leveldb::Status::OK();
    }

    // A frame cut short is where the file ends: a crash while it was written leaves one.
    leveldb::Status NextFrame() {
        bool whole = false;
        leveldb::Status status = ReadExactly(4, &length_, &whole);
        if (!status.ok()) return status;
        if (!whole) {
            ended_ = true;
            return leveldb::Status::OK();
        }
        if (checked_) {
            // A whole length must open with its tag: only the bytes after it may be cut short.
            status = ReadExactly(kTag, &lengthTag_, &whole);
            if (!status.ok()) return status;
            if (!whole) {
                ended_ = true;
                return leveldb::Status::OK();
            }
            uint8_t nonce[12], nothing[1];
            Sealer::LengthNonce(number_, nonce);
            if (!sealer_.Open(
                    key_, nonce, reinterpret_cast<const uint8_t *>(length_.data()), 4, reinterpret_cast<const uint8_t *>(lengthTag_.data()), 0,
                    nothing)) {
                return Tampered(name_);
            }
        }
        uint32_t length = ReadLittle32(reinterpret_cast<const uint8_t *>(length_.data()));
        if (length == 0 || length > kMaximumFrame) return Tampered(name_);
        status = ReadExactly(length + kTag, &sealed_, &whole);
        if (!status.ok()) return status;
        if (!whole) {
            ended_ = true;
            return leveldb::Status::OK();
        }
        start_ += plain_.size();
        plain_.resize(length);
        if (!sealer_.Open(
                key_, number_, reinterpret_cast<const uint8_t *>(length_.data()), 4, reinterpret_cast<const uint8_t *>(sealed_.data()), length,
                reinterpret_cast<uint8_t *>(&plain_[0]))) {
            // A whole frame that does not open is an error wherever it is, the last one too: a
            // plain store's log reports a last record whose checksum fails (its paranoid
            // checks), and repair then says the write is lost (a black-box probe: the last write
            // was undone in silence). Only a frame cut short is the log's end.
            if (!salvaging_) return Tampered(name_);
            Damaged(length);
        }
        ++number_;
        position_ = 0;
        return leveldb::Status::OK();
    }

    /// The `length` bytes of a frame that fails its authentication, as a repair reads them: a
    /// log record header that fails its checksum (length 0, a full record, checksum 0, which
    /// is never that of an empty record) where the frame starts and at each 32 KiB block of the
    /// log it covers, zeros elsewhere. LevelDB's log reader reports each as a damaged block and
    /// drops the rest of that block, as it does a plain log's damaged record, then reads the
    /// frames after it (a black-box probe: the read ended there, every later write lost).
    void Damaged(uint32_t length) {
        constexpr uint64_t kBlock = 32768, kHeader = 7;
        std::memset(&plain_[0], 0, length);
        auto header = [&](uint64_t at) {
            // checksum 0 (4 bytes), length 0 (2 bytes): zeros already; the type, a full record.
            if (at + kHeader <= start_ + length) plain_[at - start_ + 6] = 1;
        };
        // A block with less than a header's room left is padding: the next block's start.
        if (kBlock - start_ % kBlock >= kHeader) header(start_);
        for (uint64_t at = (start_ / kBlock + 1) * kBlock; at < start_ + length; at += kBlock) header(at);
    }

    std::unique_ptr<leveldb::SequentialFile> base_;
    std::string name_;
    uint8_t key_[32];
    bool checked_;
    std::string length_;
    std::string lengthTag_;
    std::string sealed_;
    bool salvaging_;
    std::string plain_;
    /// The offset in the log of `plain_`'s first byte.
    uint64_t start_ = 0;
    size_t position_ = 0;
    uint32_t number_ = 0;
    bool ended_ = false;
    Sealer sealer_;
};

/// Whether `name` ends in `suffix`.
bool EndsWith(const std::string &name, const char *suffix) {
    size_t n = std::strlen(suffix);
    return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
}

/// Whether LevelDB reads the file `name` at any offset (a table) rather than front to back.
bool IsTable(const std::string &name) { return EndsWith(name, ".ldb") || EndsWith(name, ".sst"); }

/// Whether `name` is a write-ahead log.
bool IsLog(const std::string &name) { return EndsWith(name, ".log"); }

/// LevelDB's info log prints key ranges: an encrypted store keeps none.
class DiscardingLogger final : public leveldb::Logger {
  public:
    void Logv(const char *, std::va_list) override {}
};

class EncryptedEnv final : public leveldb::EnvWrapper {
  public:
    EncryptedEnv(const uint8_t *key, const uint8_t *key_id, bool tamper_evident, bool salvaging)
        : leveldb::EnvWrapper(leveldb::Env::Default()), tamper_evident_(tamper_evident), salvaging_(salvaging) {
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
        uint32_t flags = 0;
        if (!empty) {
            status = CheckHeader(name, header, key_id_, tamper_evident_, initial, &flags);
            if (!status.ok()) return status;
        }
        if (!empty && (flags & kTamperEvident) != 0) {
            if ((flags & kChunked) != 0) return leveldb::Status::NotSupported(name, "a table is not read front to back");
            uint8_t file_key[32];
            if (!FileKey(key_, initial, file_key)) return CipherFailure(name);
            *result = new FramedSequentialFile(owned.release(), name, file_key, (flags & kCheckedLengths) != 0, salvaging_ && IsLog(name));
            OPENSSL_cleanse(file_key, sizeof file_key);
            return leveldb::Status::OK();
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
        uint32_t flags = 0;
        status = CheckHeader(name, header, key_id_, tamper_evident_, initial, &flags);
        if (!status.ok()) return status;
        uint64_t stored = 0;
        status = target()->GetFileSize(name, &stored);
        if (!status.ok()) return status;
        stored = stored > kHeaderSize ? stored - kHeaderSize : 0;
        if ((flags & kTamperEvident) != 0) {
            if ((flags & kChunked) == 0) return leveldb::Status::NotSupported(name, "a log is not read at any offset");
            uint8_t file_key[32];
            if (!FileKey(key_, initial, file_key)) return CipherFailure(name);
            *result = new ChunkedRandomAccessFile(owned.release(), name, stored, file_key);
            OPENSSL_cleanse(file_key, sizeof file_key);
            return leveldb::Status::OK();
        }
        *result = new EncryptedRandomAccessFile(owned.release(), name, stored, key_, initial);
        return leveldb::Status::OK();
    }

    leveldb::Status NewWritableFile(const std::string &name, leveldb::WritableFile **result) override {
        *result = nullptr;
        uint8_t header[kHeaderSize] = {0};
        std::memcpy(header, kMagic, 8);
        uint32_t flags = tamper_evident_ ? (kTamperEvident | (IsTable(name) ? kChunked : kCheckedLengths)) : 0;
        header[8] = static_cast<uint8_t>((flags & kCheckedLengths) != 0 ? kCheckedLengthsVersion : kFormatVersion);
        WriteLittle32(header + 12, flags);
        std::memcpy(header + 16, key_id_, 16);
        if (RAND_bytes(header + 32, 16) != 1) return leveldb::Status::IOError(name, "no random bytes for the file's counter");
        leveldb::WritableFile *base = nullptr;
        leveldb::Status status = target()->NewWritableFile(name, &base);
        if (!status.ok()) return status;
        std::unique_ptr<leveldb::WritableFile> owned(base);
        status = base->Append(leveldb::Slice(reinterpret_cast<const char *>(header), kHeaderSize));
        if (!status.ok()) return status;
        if (tamper_evident_) {
            uint8_t file_key[32];
            if (!FileKey(key_, header + 32, file_key)) return CipherFailure(name);
            if ((flags & kChunked) != 0) {
                *result = unsynced_.Noting(name, new ChunkedWritableFile(owned.release(), name, file_key));
            } else {
                *result = unsynced_.Noting(name, new FramedWritableFile(owned.release(), name, file_key));
            }
            OPENSSL_cleanse(file_key, sizeof file_key);
            return leveldb::Status::OK();
        }
        auto file = std::make_unique<EncryptedWritableFile>(owned.release());
        if (!file->Start(key_, header + 32)) return CipherFailure(name);
        *result = unsynced_.Noting(name, file.release());
        return leveldb::Status::OK();
    }

    satchel::UnsyncedTables &Unsynced() { return unsynced_; }

    // Only used with `reuse_logs`, which Satchel leaves off: LevelDB then starts a new file.
    leveldb::Status NewAppendableFile(const std::string &name, leveldb::WritableFile **result) override {
        *result = nullptr;
        return leveldb::Status::NotSupported(name, "an encrypted file is never appended to");
    }

    // The bytes LevelDB wrote: after the header, and for a tamper-evident table without the
    // chunks' tags (LevelDB's repair sizes tables with it). A log's is its stored size.
    leveldb::Status GetFileSize(const std::string &name, uint64_t *size) override {
        leveldb::Status status = target()->GetFileSize(name, size);
        if (!status.ok()) return status;
        uint64_t stored = *size > kHeaderSize ? *size - kHeaderSize : 0;
        *size = stored;
        if (!tamper_evident_ || !IsTable(name)) return status;
        uint64_t length = 0, last = 0;
        if (ChunkedLength(stored, &length, &last)) *size = length;
        return status;
    }

    leveldb::Status NewLogger(const std::string &, leveldb::Logger **result) override {
        *result = new DiscardingLogger();
        return leveldb::Status::OK();
    }

  private:
    uint8_t key_[32];
    uint8_t key_id_[16];
    bool tamper_evident_;
    bool salvaging_;
    leveldb_env_t handle_;
    satchel::UnsyncedTables unsynced_;
};

}  // namespace

struct satchel_encrypted_env {
    EncryptedEnv env;
    satchel_encrypted_env(const uint8_t *key, const uint8_t *key_id, bool tamper_evident, bool salvaging)
        : env(key, key_id, tamper_evident, salvaging) {}
};

extern "C" {

satchel_encrypted_env *satchel_encrypted_env_create(const uint8_t *key, const uint8_t *key_id, int tamper_evident, int salvaging) {
    return new satchel_encrypted_env(key, key_id, tamper_evident != 0, salvaging != 0);
}

leveldb_env_t *satchel_encrypted_env_leveldb(satchel_encrypted_env *env) { return env->env.Handle(); }

void satchel_encrypted_env_destroy(satchel_encrypted_env *env) { delete env; }

int satchel_encrypted_env_remove_unsynced_tables(satchel_encrypted_env *env, const char *directory) {
    return env->env.Unsynced().Remove(leveldb::Env::Default(), directory);
}

void satchel_encrypted_env_forget_tables(satchel_encrypted_env *env, const char *directory) { env->env.Unsynced().Forget(directory); }

int satchel_read_file_header(const uint8_t *bytes, size_t count, uint8_t *key_id_out) {
    if (count >= 8 && std::memcmp(bytes, kMagic, 8) != 0) return 1;
    if (count < kHeaderSize) return 2;
    uint32_t version = ReadLittle32(bytes + 8);
    if (version != kFormatVersion && version != kCheckedLengthsVersion) return 3;
    std::memcpy(key_id_out, bytes + 16, 16);
    return 0;
}

int satchel_random_bytes(uint8_t *out, size_t count) { return RAND_bytes(out, static_cast<int>(count)) == 1 ? 0 : 1; }

int satchel_seal(const uint8_t *key, const uint8_t *plain, size_t count, const uint8_t *aad, size_t aad_count, uint8_t *out) {
    if (RAND_bytes(out, 12) != 1) return 1;
    Sealer sealer;
    return sealer.Seal(key, out, aad, aad_count, plain, count, out + 12) ? 0 : 1;
}

int satchel_open(const uint8_t *key, const uint8_t *sealed, size_t count, const uint8_t *aad, size_t aad_count, uint8_t *out) {
    if (count < SATCHEL_SEAL_OVERHEAD) return 1;
    Sealer sealer;
    return sealer.Open(key, sealed, aad, aad_count, sealed + 12, count - SATCHEL_SEAL_OVERHEAD, out) ? 0 : 1;
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
