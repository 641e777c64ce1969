// Encryption at rest below LevelDB: an Env that encrypts every file LevelDB writes (tables, logs,
// MANIFEST, CURRENT) with AES-256 in CTR mode and sends its info log nowhere; AES-256-GCM sealing
// (a store's key file, blob files) and HMAC-SHA-256 (blob names). OpenSSL's EVP on Linux. The
// byte layouts are specified in docs/ENCRYPTION.md; this target owns the encrypted file header.
#ifndef SATCHEL_CLEVELDB_ENCRYPTION_H
#define SATCHEL_CLEVELDB_ENCRYPTION_H

#include <leveldb/c.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Bytes in front of every encrypted file: magic, format version, key id, initial counter.
#define SATCHEL_FILE_HEADER_SIZE 64
/// Bytes a sealed record adds: a 12-byte nonce in front, a 16-byte tag behind.
#define SATCHEL_SEAL_OVERHEAD 28

typedef struct satchel_encrypted_env satchel_encrypted_env;

/// An Env over LevelDB's default one that encrypts with `key` (32 bytes) and writes `key_id`
/// (16 bytes) into every file's header; files with another key id are refused on open. With
/// `tamper_evident`, every file is sealed in authenticated chunks or frames (AES-256-GCM), and
/// files written otherwise are refused (and the other way round). With `salvaging` (a repair's),
/// a log's whole frame that fails its authentication reads as a damaged block of the log, which
/// LevelDB's log reader reports and drops, and the frames after it are read; without it, it is
/// an error that ends the read.
satchel_encrypted_env *satchel_encrypted_env_create(const uint8_t *key, const uint8_t *key_id, int tamper_evident, int salvaging);
/// The env as LevelDB's C API takes it (`leveldb_options_set_env`); owned by `env`.
leveldb_env_t *satchel_encrypted_env_leveldb(satchel_encrypted_env *env);
/// Frees the env; every database opened with it must be closed first.
void satchel_encrypted_env_destroy(satchel_encrypted_env *env);
/// Removes the table files in `directory` that `env` created and LevelDB never synced (the output
/// of a compaction a close stopped, which no version names); call once the database there is
/// closed. Returns how many it removed.
int satchel_encrypted_env_remove_unsynced_tables(satchel_encrypted_env *env, const char *directory);
/// Forgets the tables `env` noted in `directory` (before a database opens there).
void satchel_encrypted_env_forget_tables(satchel_encrypted_env *env, const char *directory);

/// What a file header says: 0 an encrypted file of a format this build reads, version 1 or 2
/// (its key id copied to `key_id_out`), 1 no header magic (not an encrypted file), 2 shorter
/// than a header, 3 a later format version.
int satchel_read_file_header(const uint8_t *bytes, size_t count, uint8_t *key_id_out);

/// Fills `out` with `count` random bytes from OpenSSL's generator; 0 on success.
int satchel_random_bytes(uint8_t *out, size_t count);

/// AES-256-GCM: writes nonce + ciphertext + tag (count + SATCHEL_SEAL_OVERHEAD bytes) to `out`,
/// authenticating `aad` too; 0 on success.
int satchel_seal(const uint8_t *key, const uint8_t *plain, size_t count, const uint8_t *aad, size_t aad_count, uint8_t *out);
/// Opens what `satchel_seal` wrote (`count` bytes) into `out` (count - SATCHEL_SEAL_OVERHEAD
/// bytes); 0 on success, 1 when the key or the bytes are wrong (the tag does not match).
int satchel_open(const uint8_t *key, const uint8_t *sealed, size_t count, const uint8_t *aad, size_t aad_count, uint8_t *out);

/// HMAC-SHA-256 of `data` under `key` (32 bytes) into `out` (32 bytes); 0 on success.
int satchel_keyed_hash(const uint8_t *key, const uint8_t *data, size_t count, uint8_t *out);

/// scrypt (N = 2^15, r = 8, p = 1) of `passphrase` with `salt` into a 32-byte key; 0 on success.
int satchel_derive_key(const char *passphrase, size_t count, const uint8_t *salt, size_t salt_count, uint8_t *out);

/// Sets LevelDB's `reuse_logs` option, which the C API does not reach: an open appends to the
/// last log and MANIFEST instead of writing new ones.
void satchel_leveldb_options_set_reuse_logs(leveldb_options_t *options, int reuse);
/// Sends LevelDB's info log nowhere (no `LOG` file in the database's directory), as the
/// encrypting Env does.
void satchel_leveldb_options_discard_info_log(leveldb_options_t *options);

/// LevelDB's default Env, for one database, that an open armed with
/// `satchel_open_listing_env_arm(env, 1)` lists the directory through once instead of twice: the
/// first listing is kept and served to the second (the removal of obsolete files after recovery).
typedef struct satchel_open_listing_env satchel_open_listing_env;
satchel_open_listing_env *satchel_open_listing_env_create(void);
/// Makes `env` the options' Env; it must outlive every database opened with them.
void satchel_leveldb_options_set_open_listing_env(leveldb_options_t *options, satchel_open_listing_env *env);
/// Arms `env` before an open (`armed` 1) and disarms it after (0).
void satchel_open_listing_env_arm(satchel_open_listing_env *env, int armed);
/// While `refuse` is 1, `env` refuses to create table files (`.ldb`, `.sst`): a compaction fails
/// (the database then refuses writes too) instead of writing tables from blocks it read.
void satchel_open_listing_env_refuse_tables(satchel_open_listing_env *env, int refuse);
/// As `satchel_encrypted_env_remove_unsynced_tables`, for a plain database's Env.
int satchel_open_listing_env_remove_unsynced_tables(satchel_open_listing_env *env, const char *directory);
/// Frees the env; the database opened with it must be closed first.
void satchel_open_listing_env_destroy(satchel_open_listing_env *env);

/// LevelDB's lock on the database in `directory` (its `LOCK` file, as an open takes it: refused
/// while another process, or a database of this one, has it). NULL with `*errptr` set (LevelDB's
/// status text, freed with `leveldb_free`) when it cannot be had.
typedef struct satchel_database_lock satchel_database_lock;
satchel_database_lock *satchel_database_lock_take(const char *directory, char **errptr);
/// Releases the lock and frees `lock`.
void satchel_database_lock_release(satchel_database_lock *lock);

#ifdef __cplusplus
}
#endif

#endif
