/* nvdepot's C API. See bindings/c/README.md and docs/ARCHITECTURE.md, "Bindings". */

#ifndef NVDEPOT_H
#define NVDEPOT_H

/* Generated from bindings/c/src by cbindgen (see bindings/c/tests/header.rs); do not edit. */

#include <stddef.h>
#include <stdint.h>

// Success.
#define NVDEPOT_OK 0

// The key is absent.
#define NVDEPOT_NOT_FOUND 1

// A conditional write's condition did not hold; nothing was written.
#define NVDEPOT_CONDITION_FAILED 2

// The buffer is shorter than the value: it holds the value's first bytes
// and the length out-parameter says how long the value is.
#define NVDEPOT_BUFFER_TOO_SMALL 3

// An iteration has no more keys.
#define NVDEPOT_END 4

// A null pointer, a name that is not UTF-8, an unknown option or a value
// it does not take.
#define NVDEPOT_INVALID_ARGUMENT 10

// The key is longer than the store's limit.
#define NVDEPOT_KEY_TOO_LARGE 11

// The value is too long for the store or the operation.
#define NVDEPOT_VALUE_TOO_LARGE 12

// No free space that garbage collection can make.
#define NVDEPOT_STORE_FULL 13

// A device operation failed.
#define NVDEPOT_IO 14

// A record failed its checksum.
#define NVDEPOT_CORRUPT 15

// The store holds damage to acknowledged data (open with `salvage`).
#define NVDEPOT_DAMAGED 16

// The store was written by another format version.
#define NVDEPOT_FORMAT_VERSION 17

// No store at the path (set `create_bytes` to create one).
#define NVDEPOT_NOT_A_STORE 18

// No such namespace.
#define NVDEPOT_NO_SUCH_NAMESPACE 19

// The namespace exists.
#define NVDEPOT_NAMESPACE_EXISTS 20

// Options the store cannot work with.
#define NVDEPOT_CONFIG 21

// The store failed; close and reopen it.
#define NVDEPOT_UNUSABLE 22

// The store cannot close while iterators use it.
#define NVDEPOT_BUSY 23

// The store was closed.
#define NVDEPOT_CLOSED 24

// A bug in nvdepot, caught at the boundary.
#define NVDEPOT_INTERNAL 99

// `nvdepot_put_if`: write whatever is there.
#define NVDEPOT_ALWAYS 0

// `nvdepot_put_if`: write only if the key is absent.
#define NVDEPOT_IF_ABSENT 1

// `nvdepot_put_if`: write only if the key is present.
#define NVDEPOT_IF_PRESENT 2

// `nvdepot_put_if`: write only if the key's version is the one given.
#define NVDEPOT_IF_VERSION 3

// `nvdepot_write_op.op`: put `value` under `key`.
#define NVDEPOT_OP_PUT 0

// `nvdepot_write_op.op`: delete `key`.
#define NVDEPOT_OP_DELETE 1

// Namespace id meaning "every namespace" (`nvdepot_iter_begin`).
#define NVDEPOT_ALL_NAMESPACES UINT32_MAX

// An iteration over one namespace or all (opaque). Use it from one
// thread at a time; free it with `nvdepot_iter_free` before closing the
// store.
typedef struct nvdepot_iter nvdepot_iter;

// Options for `nvdepot_open` (opaque).
typedef struct nvdepot_options nvdepot_options;

// An open store (opaque). Any number of threads may use one; it is freed
// by `nvdepot_close`.
typedef struct nvdepot_store nvdepot_store;

// One write of `nvdepot_write_batch`.
typedef struct nvdepot_write_op {
  // `NVDEPOT_OP_PUT` or `NVDEPOT_OP_DELETE`.
  int op;
  const void *key;
  size_t key_len;
  // Ignored for a delete.
  const void *value;
  size_t value_len;
} nvdepot_write_op;

// A namespace as `nvdepot_ns_list` lists it.
typedef struct nvdepot_ns_info {
  // The id the data calls take.
  uint32_t id;
  // Keys in it.
  uint64_t keys;
  // Its name, NUL-terminated (freed with the list).
  char *name;
} nvdepot_ns_info;

// Counters and gauges of a store (`nvdepot_stats`).
typedef struct nvdepot_stats {
  uint64_t keys;
  uint64_t namespaces;
  uint64_t capacity_bytes;
  uint64_t segment_bytes;
  uint64_t grain_bytes;
  uint64_t segments_total;
  uint64_t segments_free;
  // Bytes of records the index points to.
  uint64_t live_bytes;
  uint64_t gets;
  uint64_t puts;
  uint64_t deletes;
  // Record bytes written for the caller's writes.
  uint64_t user_bytes_written;
  // Bytes the log wrote to the devices (user writes, GC, headers).
  uint64_t device_bytes_written;
  uint64_t gc_bytes_written;
  uint64_t gc_segments_collected;
  // Keys evicted (cache mode).
  uint64_t evictions;
  // Device cache flushes.
  uint64_t flushes;
  // DRAM the index takes.
  uint64_t index_memory_bytes;
  // Reads the value cache answered (`value_cache_bytes`; 0 when off).
  uint64_t value_cache_hits;
  // Reads the value cache sent to the store.
  uint64_t value_cache_misses;
} nvdepot_stats;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// The message of the calling thread's last call that returned a code
// other than `NVDEPOT_OK` (empty before any). Valid until the thread's
// next nvdepot call; never null.
const char *nvdepot_errmsg(void);

// The name of a code (`"NOT_FOUND"`), or `"UNKNOWN"`. Static; never null.
const char *nvdepot_strerror(int code);

// nvdepot's version (`"0.1.0"`). Static; never null.
const char *nvdepot_version(void);

// Frees memory nvdepot allocated for the caller (a value of
// `nvdepot_get_alloc` or `nvdepot_get_batch`). Null is ignored. It is
// `malloc`ed memory: `free` does the same.
void nvdepot_free(void *ptr);

extern void *libc_malloc(size_t size);

extern void libc_free(void *ptr);

// Reads the value of `key` into `buf` (`cap` bytes); `*value_len` is the
// value's length. If the buffer is shorter, it holds the value's first
// `cap` bytes and the code is `NVDEPOT_BUFFER_TOO_SMALL` (call again with
// `*value_len` bytes). `version` (may be null) receives the value's
// version for `nvdepot_put_if(NVDEPOT_IF_VERSION)`. `NVDEPOT_NOT_FOUND`
// if the key is absent. One device read.
int nvdepot_get(struct nvdepot_store *store,
                uint32_t ns,
                const void *key,
                size_t key_len,
                void *buf,
                size_t cap,
                size_t *value_len,
                uint64_t *version);

// Reads the value of `key` into memory nvdepot allocates: `*value`
// (free it with `nvdepot_free`; never null on success, even for an empty
// value) and `*value_len`. `version` may be null. `NVDEPOT_NOT_FOUND` if
// the key is absent.
int nvdepot_get_alloc(struct nvdepot_store *store,
                      uint32_t ns,
                      const void *key,
                      size_t key_len,
                      void **value,
                      size_t *value_len,
                      uint64_t *version);

// `NVDEPOT_OK` if `key` is present, `NVDEPOT_NOT_FOUND` if not.
int nvdepot_exists(struct nvdepot_store *store, uint32_t ns, const void *key, size_t key_len);

// Inserts or overwrites; durable when it returns (with `sync` on, the
// default).
int nvdepot_put(struct nvdepot_store *store,
                uint32_t ns,
                const void *key,
                size_t key_len,
                const void *value,
                size_t value_len);

// A conditional put: `cond` is `NVDEPOT_ALWAYS`, `NVDEPOT_IF_ABSENT`,
// `NVDEPOT_IF_PRESENT` or `NVDEPOT_IF_VERSION` (with `version` from a
// get: a compare-and-swap). `NVDEPOT_CONDITION_FAILED` if the condition
// did not hold (nothing written). `new_version` (may be null) receives
// the written value's version.
int nvdepot_put_if(struct nvdepot_store *store,
                   uint32_t ns,
                   const void *key,
                   size_t key_len,
                   const void *value,
                   size_t value_len,
                   int cond,
                   uint64_t version,
                   uint64_t *new_version);

// Deletes `key` (durable on return); `NVDEPOT_NOT_FOUND` if it was
// absent.
int nvdepot_delete(struct nvdepot_store *store, uint32_t ns, const void *key, size_t key_len);

// Deletes `key` only if its version is `version`:
// `NVDEPOT_CONDITION_FAILED` if it has another, `NVDEPOT_NOT_FOUND` if it
// is absent.
int nvdepot_delete_if_version(struct nvdepot_store *store,
                              uint32_t ns,
                              const void *key,
                              size_t key_len,
                              uint64_t version);

// Reads bytes `[offset, offset + len)` of the value into `buf` (clipped
// to the value's end: `*got` says how many). Reads only what the range
// needs. `NVDEPOT_NOT_FOUND` if the key is absent.
int nvdepot_get_range(struct nvdepot_store *store,
                      uint32_t ns,
                      const void *key,
                      size_t key_len,
                      uint64_t offset,
                      void *buf,
                      size_t len,
                      size_t *got);

// Writes `data` over bytes `[offset, offset + data_len)` of the value,
// as Redis's SETRANGE: an absent key is an empty value, and a shorter
// value is padded with zero bytes. `new_len` (may be null) receives the
// value's length. Atomic per key, durable on return.
int nvdepot_put_range(struct nvdepot_store *store,
                      uint32_t ns,
                      const void *key,
                      size_t key_len,
                      uint64_t offset,
                      const void *data,
                      size_t data_len,
                      uint64_t *new_len);

// Applies `count` puts and deletes with one shared flush, atomically:
// after a crash during the call all of them or none is there. Values
// must each fit one record and the batch one segment
// (`NVDEPOT_VALUE_TOO_LARGE` / `NVDEPOT_CONFIG` say by how much). The
// last operation on a key counts.
int nvdepot_write_batch(struct nvdepot_store *store,
                        uint32_t ns,
                        const struct nvdepot_write_op *ops,
                        size_t count);

// Reads `count` keys: `values[i]` / `value_lens[i]` receive key i's
// value in memory nvdepot allocates (free each with `nvdepot_free`), and
// `codes[i]` is `NVDEPOT_OK` or `NVDEPOT_NOT_FOUND` (then `values[i]` is
// null). Index lookups of neighbouring keys overlap. On an error no
// value is left allocated.
int nvdepot_get_batch(struct nvdepot_store *store,
                      uint32_t ns,
                      size_t count,
                      const void *const *keys,
                      const size_t *key_lens,
                      void **values,
                      size_t *value_lens,
                      int *codes);

// Starts an iteration over namespace `ns` (or `NVDEPOT_ALL_NAMESPACES`)
// at `cursor`: 0 for the beginning, or a value `nvdepot_iter_cursor`
// gave (in this process or another, before or after a restart). Call
// `nvdepot_iter_next` to move to the first key. Every key present and
// unmodified for the whole iteration comes exactly once (keys written
// meanwhile may or may not); after a resume, keys of the page under way
// when the cursor was taken may come again. Unordered.
int nvdepot_iter_begin(struct nvdepot_store *store,
                       uint32_t ns,
                       uint64_t cursor,
                       struct nvdepot_iter **out);

// Moves to the next key: `NVDEPOT_OK`, or `NVDEPOT_END` when there is
// none. Reads a page of keys from the device when the last is used up.
int nvdepot_iter_next(struct nvdepot_iter *it);

// The key `nvdepot_iter_next` moved to: its bytes, its value's and its
// namespace's id (any out-parameter may be null). The pointers stay valid
// until the iterator's next call. `NVDEPOT_END` before the first
// `nvdepot_iter_next` or after the last.
int nvdepot_iter_current(const struct nvdepot_iter *it,
                         const void **key,
                         size_t *key_len,
                         const void **value,
                         size_t *value_len,
                         uint32_t *ns);

// A cursor to resume this iteration from later with
// `nvdepot_iter_begin`; `NVDEPOT_END` if nothing is left to resume.
int nvdepot_iter_cursor(const struct nvdepot_iter *it, uint64_t *cursor);

// Frees an iterator (null is ignored).
void nvdepot_iter_free(struct nvdepot_iter *it);

// A new set of options, all defaults (see `nvdepot_options_set`). Null
// only if memory ran out.
struct nvdepot_options *nvdepot_options_new(void);

// Sets option `name` from text: `create_bytes` (e.g. `"1G"`; a store is
// created only when it is set), `segment_bytes`, `grain_bytes`,
// `key_bytes_max`, `value_bytes_max`, `sync` (`"true"`/`"false"`),
// `flush_interval_ms`, `location_cache_entries`, `cache_mode`,
// `eviction` (`"segment_lru"`/`"fifo"`), `background_gc`, `salvage`,
// `buffered_io`, `write_behind`, `unlock_before_durable`, and
// `value_cache_bytes` (a DRAM cache of values in front of the store,
// e.g. `"256M"`; default 0, off).
// `NVDEPOT_INVALID_ARGUMENT` for an unknown name or a bad value.
int nvdepot_options_set(struct nvdepot_options *options, const char *name, const char *value);

// Frees options (null is ignored).
void nvdepot_options_free(struct nvdepot_options *options);

// Opens the store at `path` (a directory of data files, one data file or
// a block device), creating it when `create_bytes` is set and there is
// none; `options` may be null (defaults: open only). On success `*out`
// is the store.
int nvdepot_open(const char *path,
                 const struct nvdepot_options *options,
                 struct nvdepot_store **out);

// Writes everything out, saves the index checkpoint (the next open is
// fast), closes and frees the store. `NVDEPOT_BUSY` while iterators of it
// are not freed: the store is then still open and usable. Any other code
// frees it too (an error says what failed while closing). No other call
// may use the store during or after this one.
int nvdepot_close(struct nvdepot_store *store);

// Removes the store at `path` (which must not be open): a directory's
// data files, then the directory if it is left empty; or a data file.
// Files that do not start with a store's superblock are left alone
// (`NVDEPOT_NOT_A_STORE`). Block devices are refused.
int nvdepot_destroy(const char *path);

// Makes every write acknowledged so far durable (with `sync` off, writes
// return before the device flush; this waits for one).
int nvdepot_flush(struct nvdepot_store *store);

// Creates namespace `name` (NVMKV's pools); `*ns` is its id.
// `NVDEPOT_NAMESPACE_EXISTS` if it exists.
int nvdepot_ns_create(struct nvdepot_store *store, const char *name, uint32_t *ns);

// The id of namespace `name` (every store has `"default"`).
// `NVDEPOT_NO_SUCH_NAMESPACE` if there is none.
int nvdepot_ns_open(struct nvdepot_store *store, const char *name, uint32_t *ns);

// Drops namespace `name` and every key in it (durable on return).
int nvdepot_ns_drop(struct nvdepot_store *store, const char *name);

// Deletes every key of namespace `ns` (durable on return).
int nvdepot_ns_clear(struct nvdepot_store *store, uint32_t ns);

// Keys in namespace `ns`.
int nvdepot_ns_count(struct nvdepot_store *store, uint32_t ns, uint64_t *keys);

// Every namespace, sorted by name: `*list` is an array of `*count`
// entries, freed with `nvdepot_ns_list_free`.
int nvdepot_ns_list(struct nvdepot_store *store, struct nvdepot_ns_info **list, size_t *count);

// Frees a list from `nvdepot_ns_list` (null is ignored).
void nvdepot_ns_list_free(struct nvdepot_ns_info *list, size_t count);

// The store's counters and gauges.
int nvdepot_stats_get(struct nvdepot_store *store, struct nvdepot_stats *out);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* NVDEPOT_H */
