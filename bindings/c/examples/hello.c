/* The README's example: create a store, write, read back, close. */
#include <nvdepot.h>
#include <stdio.h>

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "./data";
    nvdepot_options *opts = nvdepot_options_new();
    nvdepot_options_set(opts, "create_bytes", "1G"); /* create if absent */
    nvdepot_store *store;
    int rc = nvdepot_open(path, opts, &store);
    nvdepot_options_free(opts);
    if (rc != NVDEPOT_OK) {
        fprintf(stderr, "open %s: %s\n", path, nvdepot_errmsg());
        return 1;
    }
    uint32_t ns;
    nvdepot_ns_open(store, "default", &ns);
    nvdepot_put(store, ns, "hello", 5, "world", 5); /* durable on return */
    char value[16];
    size_t len;
    if (nvdepot_get(store, ns, "hello", 5, value, sizeof value, &len, NULL) == NVDEPOT_OK)
        printf("hello = %.*s\n", (int)len, value);
    return nvdepot_close(store) == NVDEPOT_OK ? 0 : 1;
}
