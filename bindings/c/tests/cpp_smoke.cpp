// The header from C++ (it is declared extern "C" for C++ callers): a store
// opened, written and read through a small RAII wrapper, as a C++ service
// would embed nvdepot. Run by `make test` under ASan and UBSan.
#include <nvdepot.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

namespace {

struct Closer {
    void operator()(nvdepot_store *s) const {
        if (nvdepot_close(s) != NVDEPOT_OK) std::fprintf(stderr, "close: %s\n", nvdepot_errmsg());
    }
};
using Store = std::unique_ptr<nvdepot_store, Closer>;

void check(int code, const char *what) {
    if (code != NVDEPOT_OK) throw std::runtime_error(std::string(what) + ": " + nvdepot_errmsg());
}

}  // namespace

int main(int argc, char **argv) {
    const std::string path = argc > 1 ? argv[1] : "cpp-data";
    try {
        std::unique_ptr<nvdepot_options, void (*)(nvdepot_options *)> opts(nvdepot_options_new(),
                                                                           nvdepot_options_free);
        check(nvdepot_options_set(opts.get(), "create_bytes", "64M"), "options");
        check(nvdepot_options_set(opts.get(), "segment_bytes", "1M"), "options");
        nvdepot_store *raw = nullptr;
        check(nvdepot_open(path.c_str(), opts.get(), &raw), "open");
        Store store(raw);
        uint32_t ns = 0;
        check(nvdepot_ns_open(store.get(), "default", &ns), "namespace");
        const std::string key = "key", value(5000, 'v');
        check(nvdepot_put(store.get(), ns, key.data(), key.size(), value.data(), value.size()), "put");
        std::string out(16, '\0');
        size_t len = 0;
        int rc = nvdepot_get(store.get(), ns, key.data(), key.size(), out.data(), out.size(), &len, nullptr);
        if (rc != NVDEPOT_BUFFER_TOO_SMALL || len != value.size()) throw std::runtime_error("short buffer");
        out.resize(len);
        check(nvdepot_get(store.get(), ns, key.data(), key.size(), out.data(), out.size(), &len, nullptr), "get");
        if (out != value) throw std::runtime_error("value differs");
    } catch (const std::exception &e) {
        std::fprintf(stderr, "C++ smoke: %s\n", e.what());
        return 1;
    }
    check(nvdepot_destroy(path.c_str()), "destroy");
    std::printf("C++ smoke passed\n");
    return 0;
}
