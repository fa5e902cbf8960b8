/* The C API as a C program uses it: every call, its codes and messages,
 * ownership of buffers, threads, a reopen, iteration resumed by cursor.
 * Built and run under AddressSanitizer and UndefinedBehaviorSanitizer by
 * `make -C bindings/c test`. */
#define _GNU_SOURCE
#include <nvdepot.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0;

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last message: %s)\n",  \
                    __FILE__, __LINE__, #cond, nvdepot_errmsg());            \
            failures++;                                                      \
        }                                                                    \
    } while (0)

#define CODE(expected, call)                                                 \
    do {                                                                     \
        int code_ = (call);                                                  \
        if (code_ != (expected)) {                                           \
            fprintf(stderr, "%s:%d: %s returned %s (%d), expected %s: %s\n", \
                    __FILE__, __LINE__, #call, nvdepot_strerror(code_),      \
                    code_, #expected, nvdepot_errmsg());                     \
            failures++;                                                      \
        }                                                                    \
    } while (0)

static char dir[4096];

static nvdepot_store *open_store(int create) {
    nvdepot_options *o = nvdepot_options_new();
    CHECK(o != NULL);
    if (create) CODE(NVDEPOT_OK, nvdepot_options_set(o, "create_bytes", "64M"));
    CODE(NVDEPOT_OK, nvdepot_options_set(o, "segment_bytes", "1M"));
    nvdepot_store *s = NULL;
    CODE(NVDEPOT_OK, nvdepot_open(dir, o, &s));
    nvdepot_options_free(o);
    return s;
}

static void test_errors(void) {
    nvdepot_store *s = NULL;
    /* No store and no create_bytes: a clear error, no store made. */
    CODE(NVDEPOT_NOT_A_STORE, nvdepot_open(dir, NULL, &s));
    CHECK(strstr(nvdepot_errmsg(), "no nvdepot store here") != NULL);
    CHECK(s == NULL);
    CODE(NVDEPOT_INVALID_ARGUMENT, nvdepot_open(NULL, NULL, &s));
    CODE(NVDEPOT_INVALID_ARGUMENT, nvdepot_open(dir, NULL, NULL));
    nvdepot_options *o = nvdepot_options_new();
    CODE(NVDEPOT_INVALID_ARGUMENT, nvdepot_options_set(o, "no_such_option", "1"));
    CHECK(strstr(nvdepot_errmsg(), "unknown option") != NULL);
    CODE(NVDEPOT_INVALID_ARGUMENT, nvdepot_options_set(o, "sync", "perhaps"));
    CODE(NVDEPOT_INVALID_ARGUMENT, nvdepot_options_set(o, "segment_bytes", "1Q"));
    nvdepot_options_free(o);
    nvdepot_options_free(NULL);
    CHECK(strcmp(nvdepot_strerror(NVDEPOT_NOT_FOUND), "NOT_FOUND") == 0);
    CHECK(strcmp(nvdepot_strerror(12345), "UNKNOWN") == 0);
    CHECK(strlen(nvdepot_version()) > 0);
}

static void test_data(nvdepot_store *s, uint32_t ns) {
    char buf[64];
    size_t len = 0;
    uint64_t v1 = 0, v2 = 0;
    CODE(NVDEPOT_OK, nvdepot_put(s, ns, "k", 1, "hello world", 11));
    CODE(NVDEPOT_OK, nvdepot_get(s, ns, "k", 1, buf, sizeof buf, &len, &v1));
    CHECK(len == 11 && memcmp(buf, "hello world", 11) == 0);
    /* A short buffer: the prefix and the needed length. */
    memset(buf, 0, sizeof buf);
    CODE(NVDEPOT_BUFFER_TOO_SMALL, nvdepot_get(s, ns, "k", 1, buf, 5, &len, NULL));
    CHECK(len == 11 && memcmp(buf, "hello", 5) == 0 && buf[5] == 0);
    CODE(NVDEPOT_BUFFER_TOO_SMALL, nvdepot_get(s, ns, "k", 1, NULL, 0, &len, NULL));
    CHECK(len == 11);
    /* Allocated by nvdepot, freed with nvdepot_free. */
    void *val = NULL;
    CODE(NVDEPOT_OK, nvdepot_get_alloc(s, ns, "k", 1, &val, &len, NULL));
    CHECK(val != NULL && len == 11 && memcmp(val, "hello world", 11) == 0);
    nvdepot_free(val);
    CODE(NVDEPOT_NOT_FOUND, nvdepot_get(s, ns, "absent", 6, buf, sizeof buf, &len, NULL));
    CHECK(strstr(nvdepot_errmsg(), "not found") != NULL);
    CODE(NVDEPOT_OK, nvdepot_exists(s, ns, "k", 1));
    CODE(NVDEPOT_NOT_FOUND, nvdepot_exists(s, ns, "absent", 6));
    /* The empty key and the empty value are keys and values. */
    CODE(NVDEPOT_OK, nvdepot_put(s, ns, NULL, 0, NULL, 0));
    val = NULL;
    CODE(NVDEPOT_OK, nvdepot_get_alloc(s, ns, "", 0, &val, &len, NULL));
    CHECK(val != NULL && len == 0);
    nvdepot_free(val);
    CODE(NVDEPOT_OK, nvdepot_delete(s, ns, "", 0));
    /* Conditional writes. */
    CODE(NVDEPOT_CONDITION_FAILED, nvdepot_put_if(s, ns, "k", 1, "x", 1, NVDEPOT_IF_ABSENT, 0, NULL));
    CODE(NVDEPOT_CONDITION_FAILED, nvdepot_put_if(s, ns, "new", 3, "x", 1, NVDEPOT_IF_PRESENT, 0, NULL));
    CODE(NVDEPOT_OK, nvdepot_put_if(s, ns, "new", 3, "x", 1, NVDEPOT_IF_ABSENT, 0, NULL));
    CODE(NVDEPOT_OK, nvdepot_put_if(s, ns, "k", 1, "v2", 2, NVDEPOT_IF_VERSION, v1, &v2));
    CHECK(v2 != v1);
    CODE(NVDEPOT_CONDITION_FAILED, nvdepot_put_if(s, ns, "k", 1, "v3", 2, NVDEPOT_IF_VERSION, v1, NULL));
    CODE(NVDEPOT_INVALID_ARGUMENT, nvdepot_put_if(s, ns, "k", 1, "v3", 2, 77, 0, NULL));
    CODE(NVDEPOT_CONDITION_FAILED, nvdepot_delete_if_version(s, ns, "k", 1, v1));
    CODE(NVDEPOT_OK, nvdepot_delete_if_version(s, ns, "k", 1, v2));
    CODE(NVDEPOT_NOT_FOUND, nvdepot_delete(s, ns, "k", 1));
    CODE(NVDEPOT_NOT_FOUND, nvdepot_delete_if_version(s, ns, "k", 1, v2));
    /* Bad arguments are errors, not crashes. */
    CODE(NVDEPOT_INVALID_ARGUMENT, nvdepot_put(s, ns, NULL, 3, "x", 1));
    CODE(NVDEPOT_INVALID_ARGUMENT, nvdepot_put(NULL, ns, "k", 1, "x", 1));
    CODE(NVDEPOT_INVALID_ARGUMENT, nvdepot_get(s, ns, "k", 1, NULL, 10, &len, NULL));
    CODE(NVDEPOT_NO_SUCH_NAMESPACE, nvdepot_put(s, 4000, "k", 1, "x", 1));
    /* Limits. */
    size_t big = 70000;
    char *huge = calloc(big, 1);
    CODE(NVDEPOT_KEY_TOO_LARGE, nvdepot_put(s, ns, huge, big, "x", 1));
    CHECK(strstr(nvdepot_errmsg(), "key too large") != NULL);
    free(huge);
    /* Ranges. */
    uint64_t new_len = 0;
    CODE(NVDEPOT_OK, nvdepot_put(s, ns, "r", 1, "0123456789", 10));
    CODE(NVDEPOT_OK, nvdepot_put_range(s, ns, "r", 1, 3, "abc", 3, &new_len));
    CHECK(new_len == 10);
    size_t got = 0;
    CODE(NVDEPOT_OK, nvdepot_get_range(s, ns, "r", 1, 2, buf, 5, &got));
    CHECK(got == 5 && memcmp(buf, "2abc6", 5) == 0);
    CODE(NVDEPOT_OK, nvdepot_get_range(s, ns, "r", 1, 8, buf, 50, &got));
    CHECK(got == 2 && memcmp(buf, "89", 2) == 0);
    CODE(NVDEPOT_OK, nvdepot_put_range(s, ns, "r", 1, 12, "Z", 1, &new_len));
    CHECK(new_len == 13);
    CODE(NVDEPOT_OK, nvdepot_get_range(s, ns, "r", 1, 9, buf, 10, &got));
    CHECK(got == 4 && memcmp(buf, "9\0\0Z", 4) == 0);
    CODE(NVDEPOT_NOT_FOUND, nvdepot_get_range(s, ns, "none", 4, 0, buf, 4, &got));
}

static void test_batches(nvdepot_store *s, uint32_t ns) {
    nvdepot_write_op ops[4] = {
        {NVDEPOT_OP_PUT, "b1", 2, "one", 3},
        {NVDEPOT_OP_PUT, "b2", 2, "two", 3},
        {NVDEPOT_OP_PUT, "b3", 2, "three", 5},
        {NVDEPOT_OP_DELETE, "b2", 2, NULL, 0},
    };
    CODE(NVDEPOT_OK, nvdepot_write_batch(s, ns, ops, 4));
    const void *keys[3] = {"b1", "b2", "b3"};
    size_t key_lens[3] = {2, 2, 2};
    void *values[3];
    size_t value_lens[3];
    int codes[3];
    CODE(NVDEPOT_OK, nvdepot_get_batch(s, ns, 3, keys, key_lens, values, value_lens, codes));
    CHECK(codes[0] == NVDEPOT_OK && value_lens[0] == 3 && memcmp(values[0], "one", 3) == 0);
    CHECK(codes[1] == NVDEPOT_NOT_FOUND && values[1] == NULL);
    CHECK(codes[2] == NVDEPOT_OK && value_lens[2] == 5 && memcmp(values[2], "three", 5) == 0);
    for (int i = 0; i < 3; i++) nvdepot_free(values[i]);
    nvdepot_write_op bad = {9, "x", 1, "y", 1};
    CODE(NVDEPOT_INVALID_ARGUMENT, nvdepot_write_batch(s, ns, &bad, 1));
    CODE(NVDEPOT_INVALID_ARGUMENT, nvdepot_write_batch(s, ns, NULL, 2));
    CODE(NVDEPOT_OK, nvdepot_write_batch(s, ns, NULL, 0));
}

static void test_namespaces(nvdepot_store *s) {
    uint32_t a = 0, again = 0, def = 0;
    CODE(NVDEPOT_OK, nvdepot_ns_open(s, "default", &def));
    CODE(NVDEPOT_OK, nvdepot_ns_create(s, "pool-a", &a));
    CODE(NVDEPOT_NAMESPACE_EXISTS, nvdepot_ns_create(s, "pool-a", &again));
    CODE(NVDEPOT_OK, nvdepot_ns_open(s, "pool-a", &again));
    CHECK(a == again && a != def);
    CODE(NVDEPOT_NO_SUCH_NAMESPACE, nvdepot_ns_open(s, "pool-b", &again));
    /* The same key in two namespaces holds two values. */
    CODE(NVDEPOT_OK, nvdepot_put(s, a, "same", 4, "in a", 4));
    CODE(NVDEPOT_OK, nvdepot_put(s, def, "same", 4, "in default", 10));
    char buf[32];
    size_t len;
    CODE(NVDEPOT_OK, nvdepot_get(s, a, "same", 4, buf, sizeof buf, &len, NULL));
    CHECK(len == 4 && memcmp(buf, "in a", 4) == 0);
    uint64_t keys = 0;
    CODE(NVDEPOT_OK, nvdepot_ns_count(s, a, &keys));
    CHECK(keys == 1);
    CODE(NVDEPOT_NO_SUCH_NAMESPACE, nvdepot_ns_count(s, 4000, &keys));
    nvdepot_ns_info *list = NULL;
    size_t n = 0;
    CODE(NVDEPOT_OK, nvdepot_ns_list(s, &list, &n));
    int saw_a = 0, saw_def = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(list[i].name, "pool-a") == 0 && list[i].id == a && list[i].keys == 1) saw_a = 1;
        if (strcmp(list[i].name, "default") == 0 && list[i].id == def) saw_def = 1;
    }
    CHECK(saw_a && saw_def);
    nvdepot_ns_list_free(list, n);
    CODE(NVDEPOT_OK, nvdepot_ns_clear(s, a));
    CODE(NVDEPOT_NOT_FOUND, nvdepot_exists(s, a, "same", 4));
    CODE(NVDEPOT_OK, nvdepot_ns_drop(s, "pool-a"));
    CODE(NVDEPOT_NO_SUCH_NAMESPACE, nvdepot_put(s, a, "k", 1, "v", 1));
    CODE(NVDEPOT_NO_SUCH_NAMESPACE, nvdepot_ns_drop(s, "pool-a"));
}

static void test_iteration(nvdepot_store *s) {
    uint32_t it_ns = 0;
    CODE(NVDEPOT_OK, nvdepot_ns_create(s, "iter", &it_ns));
    enum { N = 3000 };
    static char seen[N];
    char key[16];
    for (int i = 0; i < N; i++) {
        int n = snprintf(key, sizeof key, "%d", i);
        CODE(NVDEPOT_OK, nvdepot_put(s, it_ns, key, (size_t)n, key, (size_t)n));
    }
    nvdepot_iter *it = NULL;
    CODE(NVDEPOT_END, nvdepot_iter_current(NULL, NULL, NULL, NULL, NULL, NULL) == NVDEPOT_INVALID_ARGUMENT ? NVDEPOT_END : -1);
    CODE(NVDEPOT_OK, nvdepot_iter_begin(s, it_ns, 0, &it));
    CODE(NVDEPOT_END, nvdepot_iter_current(it, NULL, NULL, NULL, NULL, NULL));
    /* The store cannot close under a live iterator. */
    CODE(NVDEPOT_BUSY, nvdepot_close(s));
    int count = 0;
    uint64_t cursor = 0;
    while (count < 1000 && nvdepot_iter_next(it) == NVDEPOT_OK) {
        const void *k, *v;
        size_t kl, vl;
        uint32_t ns = 0;
        CODE(NVDEPOT_OK, nvdepot_iter_current(it, &k, &kl, &v, &vl, &ns));
        CHECK(ns == it_ns && kl == vl && memcmp(k, v, kl) == 0);
        char text[16] = {0};
        memcpy(text, k, kl < 15 ? kl : 15);
        seen[atoi(text)] = 1;
        count++;
    }
    CODE(NVDEPOT_OK, nvdepot_iter_cursor(it, &cursor));
    nvdepot_iter_free(it);
    /* Resume where it stopped, in a new iterator. */
    CODE(NVDEPOT_OK, nvdepot_iter_begin(s, it_ns, cursor, &it));
    while (nvdepot_iter_next(it) == NVDEPOT_OK) {
        const void *k;
        size_t kl;
        CODE(NVDEPOT_OK, nvdepot_iter_current(it, &k, &kl, NULL, NULL, NULL));
        char text[16] = {0};
        memcpy(text, k, kl < 15 ? kl : 15);
        seen[atoi(text)] = 1;
    }
    CODE(NVDEPOT_END, nvdepot_iter_next(it));
    CODE(NVDEPOT_END, nvdepot_iter_cursor(it, &cursor));
    nvdepot_iter_free(it);
    int all = 1;
    for (int i = 0; i < N; i++) all &= seen[i];
    CHECK(all);
    /* Every namespace at once. */
    CODE(NVDEPOT_OK, nvdepot_iter_begin(s, NVDEPOT_ALL_NAMESPACES, 0, &it));
    int total = 0;
    while (nvdepot_iter_next(it) == NVDEPOT_OK) total++;
    nvdepot_iter_free(it);
    CHECK(total >= N);
    CODE(NVDEPOT_NO_SUCH_NAMESPACE, nvdepot_iter_begin(s, 4000, 0, &it));
    nvdepot_iter_free(NULL);
}

struct worker {
    nvdepot_store *s;
    uint32_t ns;
    int id;
    int errors;
};

static void *work(void *arg) {
    struct worker *w = arg;
    char key[32], value[64], buf[64];
    for (int i = 0; i < 200; i++) {
        int kl = snprintf(key, sizeof key, "t%d-%d", w->id, i);
        int vl = snprintf(value, sizeof value, "value of %d in thread %d", i, w->id);
        size_t len = 0;
        if (nvdepot_put(w->s, w->ns, key, (size_t)kl, value, (size_t)vl) != NVDEPOT_OK) w->errors++;
        if (nvdepot_get(w->s, w->ns, key, (size_t)kl, buf, sizeof buf, &len, NULL) != NVDEPOT_OK ||
            len != (size_t)vl || memcmp(buf, value, len) != 0)
            w->errors++;
    }
    /* Each thread's messages are its own. */
    nvdepot_exists(w->s, w->ns, "absent", 6);
    if (strstr(nvdepot_errmsg(), "not found") == NULL) w->errors++;
    return NULL;
}

static void test_threads(nvdepot_store *s, uint32_t ns) {
    enum { T = 4 };
    pthread_t threads[T];
    struct worker w[T];
    for (int i = 0; i < T; i++) {
        w[i] = (struct worker){s, ns, i, 0};
        CHECK(pthread_create(&threads[i], NULL, work, &w[i]) == 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(threads[i], NULL);
        CHECK(w[i].errors == 0);
    }
}

int main(void) {
    const char *base = getenv("NVDEPOT_TEST_DIR");
    snprintf(dir, sizeof dir, "%s/nvdepot-c-test-XXXXXX", base ? base : ".");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    rmdir(dir); /* the store makes it */
    test_errors();
    nvdepot_store *s = open_store(1);
    if (s == NULL) return 1;
    uint32_t ns = 0;
    CODE(NVDEPOT_OK, nvdepot_ns_open(s, "default", &ns));
    test_data(s, ns);
    test_batches(s, ns);
    test_namespaces(s);
    test_iteration(s);
    test_threads(s, ns);
    nvdepot_stats st;
    CODE(NVDEPOT_OK, nvdepot_stats_get(s, &st));
    if (!(st.puts > 3000 && st.keys > 3000 && st.capacity_bytes > 0 && st.capacity_bytes <= 64u << 20))
        fprintf(stderr, "stats: puts %llu keys %llu capacity %llu\n", (unsigned long long)st.puts,
                (unsigned long long)st.keys, (unsigned long long)st.capacity_bytes);
    CHECK(st.puts > 3000 && st.keys > 3000 && st.capacity_bytes > 0 && st.capacity_bytes <= 64u << 20);
    CODE(NVDEPOT_OK, nvdepot_flush(s));
    CODE(NVDEPOT_OK, nvdepot_close(s));
    /* Reopened (from the checkpoint): everything is there. */
    s = open_store(0);
    char buf[32];
    size_t len = 0;
    CODE(NVDEPOT_OK, nvdepot_get(s, ns, "b3", 2, buf, sizeof buf, &len, NULL));
    CHECK(len == 5 && memcmp(buf, "three", 5) == 0);
    CODE(NVDEPOT_OK, nvdepot_get(s, ns, "t3-199", 6, buf, sizeof buf, &len, NULL));
    CODE(NVDEPOT_OK, nvdepot_close(s));
    /* With the value cache: hits, and never a stale value. */
    nvdepot_options *o = nvdepot_options_new();
    CODE(NVDEPOT_OK, nvdepot_options_set(o, "value_cache_bytes", "1M"));
    CODE(NVDEPOT_OK, nvdepot_open(dir, o, &s));
    nvdepot_options_free(o);
    CODE(NVDEPOT_OK, nvdepot_put(s, ns, "c", 1, "one", 3));
    for (int i = 0; i < 3; i++) CODE(NVDEPOT_OK, nvdepot_get(s, ns, "c", 1, buf, sizeof buf, &len, NULL));
    CODE(NVDEPOT_OK, nvdepot_put(s, ns, "c", 1, "two", 3));
    CODE(NVDEPOT_OK, nvdepot_get(s, ns, "c", 1, buf, sizeof buf, &len, NULL));
    CHECK(len == 3 && memcmp(buf, "two", 3) == 0);
    CODE(NVDEPOT_OK, nvdepot_delete(s, ns, "c", 1));
    CODE(NVDEPOT_NOT_FOUND, nvdepot_get(s, ns, "c", 1, buf, sizeof buf, &len, NULL));
    CODE(NVDEPOT_OK, nvdepot_stats_get(s, &st));
    CHECK(st.value_cache_hits >= 2 && st.value_cache_misses >= 1);
    CODE(NVDEPOT_OK, nvdepot_close(s));
    CODE(NVDEPOT_OK, nvdepot_destroy(dir));
    CHECK(access(dir, F_OK) != 0);
    CODE(NVDEPOT_NOT_A_STORE, nvdepot_destroy(dir));
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("C API tests passed\n");
    return 0;
}
